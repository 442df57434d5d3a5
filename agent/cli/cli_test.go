package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/agenttest"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

func TestMain(m *testing.M) {
	if os.Getenv("FLOCK_CLI") == "1" { // the test binary as flock-agent (the tmux test runs it so)
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	if len(os.Args) > 1 && os.Args[1] == "tool" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Exit(m.Run())
}

type flockEnv struct {
	f      *bustest.Bus
	shared string
	env    map[string]string
}

// start runs a 2-agent flock with agent-1 running (agent-2 is configured but down).
func start(t *testing.T) *flockEnv {
	t.Helper()
	f := bustest.Start(t, bustest.Agents(2))
	e := &flockEnv{f: f, shared: t.TempDir()}
	e.env = map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, protocol.OperatorUser)}

	events := make(chan *nats.Msg, 16)
	op := f.Connect(t, protocol.OperatorUser)
	if _, err := op.ChanSubscribe(protocol.EventsSubject("agent-1"), events); err != nil {
		t.Fatal(err)
	}
	_ = op.Flush()
	cfg := agenttest.Config(t, f, "agent-1", e.shared)
	cfg.Heartbeat = time.Second
	agenttest.Run(t, cfg, nil)
	for deadline := time.After(10 * time.Second); ; {
		select {
		case m := <-events:
			var ev protocol.Event
			if json.Unmarshal(m.Data, &ev) == nil && ev.Type == protocol.EventReady {
				return e
			}
		case <-deadline:
			t.Fatal("agent-1 not ready")
		}
	}
}

func (e *flockEnv) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(context.Background(), args, func(k string) string { return e.env[k] }, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	e := start(t)
	self, _ := os.Executable()

	t.Run("task to one agent", func(t *testing.T) {
		code, out, _ := e.run(t, "task", "--agent", "agent-1", "--kind", "echo", "--", "hello", "there")
		if code != cli.ExitOK || !strings.Contains(out, "[agent-1] ok") || !strings.Contains(out, "hello there") {
			t.Fatalf("exit %d, output %q", code, out)
		}
	})
	t.Run("failing task, JSON", func(t *testing.T) {
		code, out, _ := e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "3")
		var r protocol.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("not JSON: %q", out)
		}
		if code != cli.ExitTaskFailed || r.Status != protocol.StatusFailed || *r.ExitCode != 3 {
			t.Fatalf("exit %d, result %+v", code, r)
		}
	})
	t.Run("task to all waits for every agent consumer", func(t *testing.T) {
		code, out, errOut := e.run(t, "task", "--all", "--wait", "1s", "--kind", "echo", "--", "x")
		// agent-2 is in the flock but not running: one result, then a timeout naming it.
		if code != cli.ExitTimeout || !strings.Contains(out, "[agent-1] ok") || !strings.Contains(errOut, "agent-2") {
			t.Fatalf("exit %d, out %q, err %q", code, out, errOut)
		}
	})
	t.Run("unknown agent", func(t *testing.T) {
		code, _, errOut := e.run(t, "task", "--agent", "ghost", "--kind", "echo", "--", "x")
		if code != cli.ExitUnknownAgent || !strings.Contains(errOut, "ghost") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		for _, args := range [][]string{
			{"task", "--kind", "echo", "--", "x"},                       // no target
			{"task", "--agent", "agent-1", "--pool", "--", "x"},         // two targets
			{"task", "--agent", "agent-1"},                              // nothing to run
			{"task", "--agent", "agent-1", "--dir", "../x", "--", "ls"}, // escaping path
			{"send", "hello"}, // no --to
			{"frobnicate"},
		} {
			if code, _, _ := e.run(t, args...); code != cli.ExitUsage {
				t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
			}
		}
	})
	t.Run("bus unreachable", func(t *testing.T) {
		code, _, _ := e.run(t, "task", "--nats", "nats://127.0.0.1:1", "--agent", "agent-1", "--kind", "echo", "--", "x")
		if code != cli.ExitBus {
			t.Fatalf("exit %d, want %d", code, cli.ExitBus)
		}
	})
	t.Run("send", func(t *testing.T) {
		code, out, _ := e.run(t, "send", "--to", "agent-1", "please", "review")
		if code != cli.ExitOK || !strings.Contains(out, "delivered") {
			t.Fatalf("exit %d, %q", code, out)
		}
		file := strings.TrimSpace(out[strings.LastIndex(out, ": ")+2:])
		mustRead := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
		if !strings.Contains(mustRead(filepath.Join(e.shared, "agents", "agent-1", file)), "please review") {
			t.Fatalf("message not in %s", file)
		}
		// A stopped agent's mail waits in its mailbox: queued, not refused.
		if code, out, errOut := e.run(t, "send", "--to", "agent-2", "--wait", "300ms", "hello?"); code != cli.ExitOK || !strings.Contains(out, "queued ") || !strings.Contains(out, "for agent-2 (mailbox seq 1)") {
			t.Fatalf("send to a stopped agent: exit %d (want %d), %q %q", code, cli.ExitOK, out, errOut)
		}
		if code, _, errOut := e.run(t, "send", "--to", "agent-7", "hello?"); code != cli.ExitUnknownAgent || !strings.Contains(errOut, `no such agent: the bus keeps no mailbox for "agent-7"`) {
			t.Fatalf("send to an agent the flock does not have: exit %d (want %d), %q", code, cli.ExitUnknownAgent, errOut)
		}
	})
	t.Run("agents", func(t *testing.T) {
		code, out, _ := e.run(t, "agents", "--json")
		if code != cli.ExitOK {
			t.Fatalf("exit %d", code)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var st struct {
				ID    string
				Stale bool
				Last  *protocol.Heartbeat `json:"last_heartbeat"`
			}
			if err := json.Unmarshal([]byte(line), &st); err != nil {
				t.Fatal(err)
			}
			seen[st.ID] = true
			switch st.ID {
			case "agent-1":
				if st.Last == nil || st.Stale || st.Last.State != protocol.StateReady {
					t.Fatalf("agent-1: %s", line)
				}
			case "agent-2":
				if st.Last != nil || !st.Stale {
					t.Fatalf("agent-2 never ran: %s", line)
				}
			}
		}
		if !seen["agent-1"] || !seen["agent-2"] {
			t.Fatalf("agents: %q", out)
		}
		code, out, _ = e.run(t, "agents")
		if code != cli.ExitOK || !strings.Contains(out, "AGENT") || !strings.Contains(out, "never") {
			t.Fatalf("table: %q", out)
		}
	})
	t.Run("watch", func(t *testing.T) {
		var out bytes.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			done <- cli.Main(ctx, []string{"watch", "--no-heartbeats"}, func(k string) string { return e.env[k] }, cli.IO{Out: &safeBuf{b: &out}, Err: &bytes.Buffer{}})
		}()
		time.Sleep(300 * time.Millisecond)
		if code, _, _ := e.run(t, "task", "--agent", "agent-1", "--id", "watched", "--kind", "echo", "--", "x"); code != 0 {
			t.Fatal(code)
		}
		time.Sleep(200 * time.Millisecond)
		cancel()
		if code := <-done; code != cli.ExitOK {
			t.Fatalf("watch exit %d", code)
		}
		if !strings.Contains(out.String(), "result    agent-1      watched ok") {
			t.Fatalf("watch output %q", out.String())
		}
	})
}

type safeBuf struct{ b *bytes.Buffer }

func (s *safeBuf) Write(p []byte) (int, error) { return s.b.Write(p) }

func TestHealthCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	status := filepath.Join(dir, "status")
	env := map[string]string{"STATUS_FILE": status}
	run := func() int {
		return cli.Main(context.Background(), []string{"health"}, func(k string) string { return env[k] }, cli.IO{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	}
	if run() != cli.ExitTaskFailed {
		t.Fatal("healthy without a status file")
	}
	_ = os.WriteFile(status, []byte(`{"time":"`+time.Now().UTC().Format(time.RFC3339Nano)+`","state":"ready"}`), 0o600)
	if code := run(); code != cli.ExitOK {
		t.Fatalf("fresh status: exit %d", code)
	}
	_ = os.WriteFile(status, []byte(`{"time":"`+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)+`","state":"ready"}`), 0o600)
	if run() != cli.ExitTaskFailed {
		t.Fatal("healthy with an hour-old status")
	}
}
