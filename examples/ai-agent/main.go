// Command ai-agent is an example AI agent program for an AI Flock: it answers
// the prompts its agent receives with a model, through the stock Anthropic Go
// SDK, and tells a peer agent the answer over the flock's bus; and it works
// the board's prompt tasks (board.go).
//
//	ai-agent run [NAME=VALUE…]  the agent program (flock:program): answer
//	                            every prompt that arrives in the agent's inbox,
//	                            and the board's prompt tasks
//	ai-agent ask PROMPT…        answer one prompt: print it and write answer.md
//
// The SDK is configured only by its own variables, ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY. In a flock the base URL is the model gateway, which
// replaces whatever key the agent sends with the real one; with a real key and
// no ANTHROPIC_BASE_URL it talks to the real API unchanged.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

const usage = `usage:
  ai-agent run [NAME=VALUE…]  answer the prompts in the agent's inbox and the board's prompt
                              tasks (the agent program); NAME=VALUE sets a variable, such as
                              AI_AGENT_PEER=agent-2 or AI_AGENT_BOARD=off
  ai-agent ask PROMPT…        answer one prompt: print it and write answer.md
`

// main is the same as in every binary of the flock: SIGTERM and SIGINT cancel
// the context run works under, and run's result is the exit code.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "ask":
		prompt := strings.Join(args[1:], " ")
		if strings.TrimSpace(prompt) == "" {
			fmt.Fprint(stderr, usage)
			return 2
		}
		a, err := newModel(getenv).ask(ctx, prompt)
		if err == nil {
			err = writeAtomic("answer.md", a.text)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ai-agent:", err)
			return 1
		}
		fmt.Fprintln(stdout, a.text)
		return 0
	case "run":
		// The program's arguments are how a flock configures one agent's
		// program (flock:agents[].program), so they can set variables too.
		set := map[string]string{}
		for _, arg := range args[1:] {
			name, value, ok := strings.Cut(arg, "=")
			if !ok || name == "" {
				fmt.Fprint(stderr, usage)
				return 2
			}
			set[name] = value
		}
		env := func(name string) string {
			if v, ok := set[name]; ok {
				return v
			}
			return getenv(name)
		}
		if v := strings.ToLower(strings.TrimSpace(env("AI_AGENT_BOARD"))); v != "" && v != "on" && v != "off" {
			fmt.Fprintf(stderr, "ai-agent: AI_AGENT_BOARD: want on or off (got %q)\n", env("AI_AGENT_BOARD"))
			return 2
		}
		log := slog.New(slog.NewJSONHandler(stdout, nil))
		if err := newAgent(env, newModel(env), stderr, log).loop(ctx); err != nil {
			log.Error("cannot run", "err", err)
			return 1
		}
		return 0
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
}

// model is a model behind the Anthropic Messages API.
type model struct {
	client anthropic.Client
	name   string
}

// newModel configures the stock client from the variables the SDK itself
// reads (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY). Without a key of its own the
// agent sends its gateway token (aws: the gateway knows the agent by it) or
// any word (dev: the gateway knows the agent by its network): the gateway
// holds the real key and puts it in place of the one the agent sends.
func newModel(getenv func(string) string) model {
	var opts []option.RequestOption
	if url := getenv("ANTHROPIC_BASE_URL"); url != "" {
		opts = append(opts, option.WithBaseURL(url))
	}
	key := getenv("ANTHROPIC_API_KEY")
	if key == "" {
		key = getenv("FLOCK_GATEWAY_TOKEN")
	}
	if key == "" {
		key = "unused-the-gateway-holds-the-key"
	}
	opts = append(opts, option.WithAPIKey(key))
	// The task's trace (W3C): the gateway ties the call to it.
	if tp := getenv("TRACEPARENT"); tp != "" {
		opts = append(opts, option.WithHeader("traceparent", tp))
	}
	name := getenv("AI_AGENT_MODEL")
	if name == "" {
		name = "claude-sonnet-4-5"
	}
	return model{client: anthropic.NewClient(opts...), name: name}
}

// answer is the model's text and the tokens it reported.
type answer struct {
	text                      string
	inputTokens, outputTokens int64
}

// ask sends one prompt and gathers the streamed reply.
func (m model) ask(ctx context.Context, prompt string) (answer, error) {
	stream := m.client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model:     anthropic.Model(m.name),
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	})
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return answer{}, err
		}
	}
	if err := stream.Err(); err != nil {
		return answer{}, err
	}
	if msg.StopReason == "" { // no message_delta: the stream was cut short
		return answer{}, errors.New("the model's stream ended before its message did")
	}
	var text strings.Builder
	for _, block := range msg.Content {
		if block.Type == "text" {
			text.WriteString(block.Text)
		}
	}
	return answer{text: text.String(), inputTokens: msg.Usage.InputTokens, outputTokens: msg.Usage.OutputTokens}, nil
}

// writeAtomic writes a file whole or not at all: a temporary file in the same
// directory, renamed over name.
func writeAtomic(name, text string) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
