package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agent is `ai-agent run`: it answers the prompts in its agent's inbox.
type agent struct {
	id      string // FLOCK_AGENT_ID
	dir     string // FLOCK_AGENT_DIR: answers/ and ai-agent/handled/ are here
	inbox   string // FLOCK_INBOX_DIR: one JSON file per message, names oldest first
	bin     string // FLOCK_AGENT_BIN: flock-agent, whose `mcp` sends as this agent
	peer    string // AI_AGENT_PEER: who hears the answers (a message's data.peer wins)
	board   bool   // AI_AGENT_BOARD: work the board's prompt tasks (on unless "off")
	shared  string // FLOCK_SHARED_DIR: artifact references are relative to it
	getenv  func(string) string
	model   model
	log     *slog.Logger
	stderr  io.Writer       // flock-agent mcp's diagnostics
	handled map[string]bool // inbox files done with (also marked on disk)
}

func newAgent(getenv func(string) string, m model, stderr io.Writer, log *slog.Logger) *agent {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	dir := env("FLOCK_AGENT_DIR", ".") // the agent program starts in its agent's directory
	return &agent{
		id: getenv("FLOCK_AGENT_ID"), dir: dir, inbox: env("FLOCK_INBOX_DIR", filepath.Join(dir, "inbox")),
		bin: env("FLOCK_AGENT_BIN", "/flock-agent"), peer: getenv("AI_AGENT_PEER"),
		board: !strings.EqualFold(strings.TrimSpace(getenv("AI_AGENT_BOARD")), "off"), shared: getenv("FLOCK_SHARED_DIR"), getenv: getenv,
		model: m, log: log, stderr: stderr, handled: map[string]bool{},
	}
}

// loop reads the inbox every 500 ms until ctx ends (SIGTERM): the message
// being handled then is finished first. Beside it, it works the board's
// prompt tasks (board.go) unless AI_AGENT_BOARD=off.
func (a *agent) loop(ctx context.Context) error {
	for _, d := range []string{"answers", filepath.Join("ai-agent", "handled")} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return err
		}
	}
	a.log.Info("started", "agent", a.id, "inbox", a.inbox, "model", a.model.name, "peer", a.peer, "board", a.board)
	if a.board {
		boardDone := make(chan struct{})
		go func() { defer close(boardDone); a.workBoard(ctx) }()
		defer func() { <-boardDone }()
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		a.poll(ctx)
		select {
		case <-ctx.Done():
			a.log.Info("stopped")
			return nil
		case <-tick.C:
		}
	}
}

// poll handles the inbox files not handled yet, oldest first. Each one is
// marked in ai-agent/handled/ once done, so a restart does not redo it.
func (a *agent) poll(ctx context.Context) {
	entries, err := os.ReadDir(a.inbox) // sorted by name: oldest first
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Error("cannot read the inbox", "err", err)
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		if ctx.Err() != nil {
			return // stopping: the rest is for the next start
		}
		if a.handled[name] || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue // done, or not a message (".…tmp": one being written)
		}
		mark := filepath.Join(a.dir, "ai-agent", "handled", name)
		if _, err := os.Stat(mark); err != nil {
			// Finished even if ctx ends meanwhile: the flock's grace period
			// (SIGTERM, then SIGKILL) is for this.
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
			a.handle(hctx, name)
			cancel()
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				a.log.Error("cannot mark the message handled", "file", name, "err", err)
			}
		}
		a.handled[name] = true
	}
}

// stored is what the flock-agent stores for each message (the fields used
// here): From is the sender the bus vouched for.
type stored struct {
	From    string `json:"from"`
	Message struct {
		ID   string          `json:"id"`
		Body string          `json:"body"`
		Data json.RawMessage `json:"data"`
	} `json:"message"`
}

// handle answers one message: the model's answer goes to answers/<id>.md (or
// its error to answers/<id>.error), then to the peer.
func (a *agent) handle(ctx context.Context, name string) {
	var st stored
	b, err := os.ReadFile(filepath.Join(a.inbox, name))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		a.log.Error("unreadable message", "file", name, "err", err)
		return
	}
	id := st.Message.ID // the flock-agent made sure it is a safe file name
	var data struct{ Kind, Peer string }
	_ = json.Unmarshal(st.Message.Data, &data) // data is optional, any JSON
	log := a.log.With("id", id, "from", st.From)
	if st.From == a.id || data.Kind == "answer" || strings.TrimSpace(st.Message.Body) == "" {
		log.Info("not a prompt: skipped", "kind", data.Kind)
		return
	}

	file := filepath.Join(a.dir, "answers", id+".md")
	text, err := os.ReadFile(file) // there already: answered before a restart
	if err != nil {
		log.Info("asking the model", "model", a.model.name)
		ans, err := a.model.ask(ctx, st.Message.Body)
		if err != nil {
			log.Error("the model failed", "err", err, "error_file", strings.TrimSuffix(file, ".md")+".error")
			if err := writeAtomic(strings.TrimSuffix(file, ".md")+".error", err.Error()+"\n"); err != nil {
				log.Error("cannot write the error file", "err", err)
			}
			return
		}
		if err := writeAtomic(file, ans.text); err != nil {
			log.Error("cannot write the answer", "err", err)
			return
		}
		log.Info("answered", "answer_file", file, "input_tokens", ans.inputTokens, "output_tokens", ans.outputTokens)
		text = []byte(ans.text)
	}

	peer := data.Peer
	if peer == "" {
		peer = a.peer
	}
	if peer == "" {
		log.Info("nobody to tell")
		return
	}
	receipt, err := a.send(ctx, peer, string(text), map[string]any{"kind": "answer", "in_reply_to": id, "from_model": true})
	if err != nil {
		log.Error("cannot tell the peer", "peer", peer, "err", err)
		return
	}
	log.Info("told the peer", "peer", peer, "peer_file", receipt)
}

// send messages a peer as this agent with the send tool of `flock-agent mcp`,
// an MCP server on stdio run for this one call. It returns the file the peer
// stored the message in, or says that the bus queued it for the peer.
func (a *agent) send(ctx context.Context, to, body string, data any) (string, error) {
	cmd := exec.Command(a.bin, "mcp")
	cmd.Stderr = a.stderr
	// A process group of its own: the SIGTERM the flock sends this program's
	// group must not cut a send short. It ends when its stdin is closed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "ai-agent", Version: "v0.1.0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return "", fmt.Errorf("%s mcp: %w", a.bin, err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      "send",
		Arguments: map[string]any{"to": to, "body": body, "data": data},
	})
	if err != nil {
		return "", err
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		return "", errors.New(strings.Join(msg, "; "))
	}
	var receipt struct {
		Status string `json:"status"`
		File   string `json:"file"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &receipt)
	if receipt.File == "" {
		return receipt.Status + ": the bus keeps it until the peer takes it", nil
	}
	return receipt.File, nil
}
