package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/agentcli"
	"github.com/ai-flock/ai-flock/tests/agenttest"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The test binary doubles as flock-agent (AI_AGENT_TEST_FLOCK_AGENT=1), so
// `ai-agent run` starts the real `flock-agent mcp` as its MCP server.
func TestMain(m *testing.M) { agentcli.Main(m, "AI_AGENT_TEST_FLOCK_AGENT") }

// fakeAnthropic serves POST /v1/messages as the Anthropic API streams it
// (server-sent events). Its answer is "fake answer to: <prompt>". A prompt
// with "overload" gets a 529, with "invalid" a 400, and with "slow" waits
// for release after the first event.
type fakeAnthropic struct {
	mu      sync.Mutex
	seen    []seenRequest
	release chan struct{}
}

type seenRequest struct {
	Key    string // x-api-key
	Trace  string // traceparent
	Path   string
	Prompt string
	Body   struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"messages"`
	}
}

const inTokens, outTokens = 17, 9

// startFake serves the fake under /anthropic, as the gateway serves it; the
// base URL to give the SDK is the returned URL.
func startFake(t *testing.T) (*fakeAnthropic, string) {
	f := &fakeAnthropic{release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("/anthropic/", http.StripPrefix("/anthropic", f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/anthropic"
}

func (f *fakeAnthropic) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// asked counts the requests whose prompt contains s.
func (f *fakeAnthropic) asked(s string) int {
	n := 0
	for _, r := range f.requests() {
		if strings.Contains(r.Prompt, s) {
			n++
		}
	}
	return n
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req seenRequest
	req.Key, req.Path, req.Trace = r.Header.Get("X-Api-Key"), r.URL.Path, r.Header.Get("traceparent")
	if err := json.NewDecoder(r.Body).Decode(&req.Body); err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no"}}`, http.StatusNotFound)
		return
	}
	if len(req.Body.Messages) > 0 && len(req.Body.Messages[0].Content) > 0 {
		req.Prompt = req.Body.Messages[0].Content[0].Text
	}
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.mu.Unlock()

	fail := func(code int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
	}
	switch {
	case strings.Contains(req.Prompt, "overload"):
		fail(529, "overloaded_error", "Overloaded")
		return
	case strings.Contains(req.Prompt, "invalid"):
		fail(http.StatusBadRequest, "invalid_request_error", "prompt: invalid")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		w.(http.Flusher).Flush()
	}
	type m = map[string]any
	event("message_start", m{"type": "message_start", "message": m{
		"id": "msg_fake1", "type": "message", "role": "assistant", "model": req.Body.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": m{"input_tokens": inTokens, "output_tokens": 1},
	}})
	if strings.Contains(req.Prompt, "slow") {
		<-f.release
	}
	event("content_block_start", m{"type": "content_block_start", "index": 0, "content_block": m{"type": "text", "text": ""}})
	event("ping", m{"type": "ping"})
	event("content_block_delta", m{"type": "content_block_delta", "index": 0, "delta": m{"type": "text_delta", "text": "fake answer"}})
	event("content_block_delta", m{"type": "content_block_delta", "index": 0, "delta": m{"type": "text_delta", "text": " to: " + req.Prompt}})
	event("content_block_stop", m{"type": "content_block_stop", "index": 0})
	event("message_delta", m{"type": "message_delta", "delta": m{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": m{"output_tokens": outTokens}})
	event("message_stop", m{"type": "message_stop"})
}

func TestAskPrintsAndWritesTheAnswerSendingTheConfiguredKey(t *testing.T) {
	fake, base := startFake(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		key  string
	}{
		{"own key", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-real", "FLOCK_GATEWAY_TOKEN": "gw-tok"}, "sk-ant-real"},
		{"gateway token (aws)", map[string]string{"FLOCK_GATEWAY_TOKEN": "gw-tok"}, "gw-tok"},
		{"no key (dev)", map[string]string{}, "unused-the-gateway-holds-the-key"},
		{"in a traced task", map[string]string{"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "unused-the-gateway-holds-the-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			tc.env["ANTHROPIC_BASE_URL"] = base
			var stdout, stderr bytes.Buffer
			n := len(fake.requests())
			code := run(context.Background(), []string{"ask", "what", "is", "2+2?"}, func(k string) string { return tc.env[k] }, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr.String())
			}
			const want = "fake answer to: what is 2+2?"
			if stdout.String() != want+"\n" {
				t.Fatalf("stdout %q, want %q", stdout.String(), want+"\n")
			}
			if b, err := os.ReadFile("answer.md"); err != nil || string(b) != want {
				t.Fatalf("answer.md: %q, %v", b, err)
			}
			reqs := fake.requests()[n:]
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Key != tc.key || r.Path != "/v1/messages" || !r.Body.Stream || r.Body.Model != "claude-sonnet-4-5" || r.Body.MaxTokens != 1024 {
				t.Fatalf("the fake saw key %q, path %q, body %+v", r.Key, r.Path, r.Body)
			}
			if r.Trace != tc.env["TRACEPARENT"] {
				t.Fatalf("the call's traceparent %q, want the task's %q", r.Trace, tc.env["TRACEPARENT"])
			}
		})
	}
}

func TestAskFailsWithTheModelsErrorAndBadUsageIsRefused(t *testing.T) {
	_, base := startFake(t)
	t.Chdir(t.TempDir())
	env := map[string]string{"ANTHROPIC_BASE_URL": base, "AI_AGENT_MODEL": "claude-haiku-4-5"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"ask", "an invalid prompt"}, func(k string) string { return env[k] }, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "400") || !strings.Contains(stderr.String(), "invalid_request_error") || stdout.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if _, err := os.Stat("answer.md"); err == nil {
		t.Fatal("answer.md written for a failed call")
	}
	for _, args := range [][]string{{"ask"}, {}, {"run", "AI_AGENT_PEER"}, {"serve"}} {
		if code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr); code != 2 {
			t.Fatalf("%q: exit %d, want 2 (usage)", args, code)
		}
	}
}

// TestRunAnswersPromptsAndTellsThePeer runs `ai-agent run` as agent-1 of a
// real bus with real flock-agents, its MCP server the real `flock-agent mcp`.
func TestRunAnswersPromptsAndTellsThePeer(t *testing.T) {
	fake, base := startFake(t)
	f, shared := startFlock(t, 3)
	op := f.Connect(t, protocol.OperatorUser)
	dir := filepath.Join(shared, "agents", "agent-1")
	for k, v := range map[string]string{
		"FLOCK_AGENT_ID": "agent-1", "FLOCK_AGENT_DIR": dir, "FLOCK_INBOX_DIR": filepath.Join(dir, "inbox"),
		"FLOCK_SHARED_DIR": shared, "FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, "agent-1"),
		"FLOCK_AGENT_BIN": os.Args[0], "AI_AGENT_TEST_FLOCK_AGENT": "1", // `flock-agent mcp` is this binary
		"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "", "FLOCK_GATEWAY_TOKEN": "gw-tok-1",
		"AI_AGENT_PEER": "agent-3", "AI_AGENT_MODEL": "",
	} {
		t.Setenv(k, v)
	}
	send := func(from, id, body string, data any) {
		t.Helper()
		nc := op
		if from != protocol.OperatorUser {
			nc = f.Connect(t, from)
		}
		msg := protocol.Message{ID: id, Body: body}
		if data != nil {
			msg.Data, _ = json.Marshal(data)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := mailbox.Send(ctx, nc, from, "agent-1", msg, 5*time.Second); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	start := func(args ...string) (stop func() string) {
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncBuffer{}
		done := make(chan int, 1)
		go func() { done <- run(ctx, append([]string{"run"}, args...), os.Getenv, out, out) }()
		return func() string {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("run exited %d, want 0", code)
				}
			case <-time.After(30 * time.Second):
				t.Error("run did not stop")
			}
			return out.String()
		}
	}

	// 1. A prompt naming its peer (which wins over AI_AGENT_PEER); SIGTERM
	// (ctx's end) while the model streams: the message is finished, answer
	// and send, then run exits 0.
	stop := start()
	send(protocol.OperatorUser, "q-1", "what is 2+2? (slow)", map[string]any{"peer": "agent-2"})
	waitFor(t, "the model call for q-1", func() bool { return fake.asked("2+2") == 1 })
	out := make(chan string, 1)
	go func() { out <- stop() }()
	time.Sleep(300 * time.Millisecond) // the stop is under way
	close(fake.release)
	log1 := <-out
	const want1 = "fake answer to: what is 2+2? (slow)"
	if b, err := os.ReadFile(filepath.Join(dir, "answers", "q-1.md")); err != nil || string(b) != want1 {
		t.Fatalf("answers/q-1.md: %q, %v\nlog:\n%s", b, err, log1)
	}
	got := fromAgent1(t, shared, "agent-2")
	if len(got) != 1 || got[0].Message.Body != want1 {
		t.Fatalf("agent-2 got %+v\nlog:\n%s", got, log1)
	}
	var data map[string]any
	if err := json.Unmarshal(got[0].Message.Data, &data); err != nil || data["kind"] != "answer" || data["in_reply_to"] != "q-1" || data["from_model"] != true {
		t.Fatalf("agent-2's message data %s", got[0].Message.Data)
	}
	if r := fake.requests()[0]; r.Key != "gw-tok-1" || r.Body.Model != "claude-sonnet-4-5" || !r.Body.Stream {
		t.Fatalf("the fake saw %+v", r)
	}
	logHas(t, log1, map[string]any{"msg": "answered", "id": "q-1", "input_tokens": float64(inTokens), "output_tokens": float64(outTokens),
		"answer_file": filepath.Join(dir, "answers", "q-1.md")})
	logHas(t, log1, map[string]any{"msg": "told the peer", "id": "q-1", "peer": "agent-2"})

	// 2. Started again: q-1 is not asked or told again. Not prompts: an
	// answer and its own message. A model error (529) writes q-2.error and
	// the loop goes on to q-3, told to AI_AGENT_PEER as run's argument sets
	// it (over the environment's).
	t.Setenv("AI_AGENT_PEER", "agent-2")
	stop = start("AI_AGENT_PEER=agent-3")
	send("agent-2", "a-1", "an answer is no prompt", map[string]any{"kind": "answer"})
	send("agent-1", "self-1", "my own message is no prompt", nil)
	send(protocol.OperatorUser, "q-2", "overload me", nil)
	send(protocol.OperatorUser, "q-3", "the capital of France?", nil)
	waitFor(t, "answers/q-3.md", func() bool { return exists(filepath.Join(dir, "answers", "q-3.md")) })
	waitFor(t, "agent-3 told", func() bool { return len(fromAgent1(t, shared, "agent-3")) == 1 })
	log2 := stop()

	if b, err := os.ReadFile(filepath.Join(dir, "answers", "q-2.error")); err != nil || !strings.Contains(string(b), "529") || !strings.Contains(string(b), "overloaded_error") {
		t.Fatalf("answers/q-2.error: %q, %v\nlog:\n%s", b, err, log2)
	}
	for _, f := range []string{"q-2.md", "a-1.md", "self-1.md"} {
		if exists(filepath.Join(dir, "answers", f)) {
			t.Errorf("answers/%s written", f)
		}
	}
	if n := fake.asked("2+2"); n != 1 {
		t.Errorf("q-1 asked %d times: a restart redid it", n)
	}
	if n := fake.asked("no prompt"); n != 0 {
		t.Errorf("non-prompts asked %d times", n)
	}
	if got := fromAgent1(t, shared, "agent-2"); len(got) != 1 {
		t.Errorf("agent-2 got %d messages, want q-1's answer only", len(got))
	}
	got = fromAgent1(t, shared, "agent-3")
	if err := json.Unmarshal(got[0].Message.Data, &data); err != nil || got[0].Message.Body != "fake answer to: the capital of France?" || data["in_reply_to"] != "q-3" {
		t.Fatalf("agent-3 got %+v (data %s)", got[0], got[0].Message.Data)
	}
	logHas(t, log2, map[string]any{"msg": "the model failed", "id": "q-2", "level": "ERROR"})
	logHas(t, log2, map[string]any{"msg": "not a prompt: skipped", "id": "a-1"})
	logHas(t, log2, map[string]any{"msg": "not a prompt: skipped", "id": "self-1"})
	if strings.Contains(log2, `"q-1"`) {
		t.Errorf("the second run logged q-1 again:\n%s", log2)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "answers"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("a temporary file is left: %s", e.Name())
		}
	}
}

// startFlock starts a real bus and n real agents (flock-agent run, in
// process) sharing one directory, and waits until each stores messages.
func startFlock(t *testing.T, n int) (*bustest.Bus, string) {
	f, shared := bustest.Start(t, bustest.Agents(n)), t.TempDir()
	op := f.Connect(t, protocol.OperatorUser)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("agent-%d", i)
		agenttest.Run(t, agenttest.Config(t, f, id, shared), nil)
		// Ready once it answers a message, which stays in its inbox (an
		// empty body: not a prompt, should agent-1 read it).
		waitFor(t, id+" ready", func() bool {
			_, err := op.Request(protocol.InboxSubject(id, protocol.OperatorUser), []byte(`{"v":1,"id":"ping","data":{"ping":true}}`), time.Second)
			return err == nil
		})
	}
	return f, shared
}

// fromAgent1 is what agent id stored from agent-1.
func fromAgent1(t *testing.T, shared, id string) []worker.Stored {
	t.Helper()
	var out []worker.Stored
	inbox := filepath.Join(shared, "agents", id, "inbox")
	entries, _ := os.ReadDir(inbox)
	for _, e := range entries {
		var st worker.Stored
		b, err := os.ReadFile(filepath.Join(inbox, e.Name()))
		if err == nil && json.Unmarshal(b, &st) == nil && st.From == "agent-1" {
			out = append(out, st)
		}
	}
	return out
}

// logHas fails unless a JSON line of log has every field of want.
func logHas(t *testing.T, log string, want map[string]any) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var got map[string]any
		if json.Unmarshal([]byte(line), &got) != nil {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && got[k] == v
		}
		if ok {
			return
		}
	}
	t.Errorf("no log line with %v in:\n%s", want, log)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, what, ok)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// syncBuffer is a bytes.Buffer run writes to while the test reads it.
type syncBuffer = syncbuf.Buffer
