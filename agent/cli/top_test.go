package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/agenttest"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// liveFlock is a bus with n agents running, each logging into the memory a
// logs request reads (as flock-agent run does).
func liveFlock(t *testing.T, n int, opts ...bustest.Option) *flockEnv {
	t.Helper()
	f := bustest.Start(t, bustest.Agents(n), opts...)
	e := &flockEnv{f: f, shared: t.TempDir()}
	e.env = map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, protocol.OperatorUser)}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("agent-%d", i)
		cfg := agenttest.Config(t, f, id, e.shared)
		cfg.Concurrency, cfg.Heartbeat, cfg.Recent = 2, 500*time.Millisecond, worker.NewRecentLog()
		agenttest.Run(t, cfg, slog.New(slog.NewJSONHandler(cfg.Recent, nil)).With("agent", id))
	}
	testkit.WaitFor(t, 10*time.Second, "every agent to say it is ready", func() bool {
		code, out, _ := e.run(t, "agents", "--json")
		return code == cli.ExitOK && strings.Count(out, `"state":"ready"`) == n
	})
	return e
}

// spend writes an agent's ledger entry as the gateway would.
func (e *flockEnv) spend(t *testing.T, id string, spent, budget int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := bustest.JetStream(t, e.f.Connect(t, protocol.OperatorUser)).KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(protocol.LedgerEntry{V: 1, Agent: id, Spent: spent, Budget: budget, Updated: time.Now().UTC(), By: "gateway"})
	if _, err := kv.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
}

func TestLogsAsksTheAgentOverTheBus(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 2)
	code, out, errOut := e.run(t, "logs", "agent-1", "--lines", "5")
	if code != cli.ExitOK || !strings.Contains(out, `"msg":"agent ready"`) || !strings.Contains(out, `"agent":"agent-1"`) || strings.Contains(out, `"agent":"agent-2"`) {
		t.Fatalf("exit %d, out %q, err %q", code, out, errOut)
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n > 5 {
		t.Fatalf("asked for 5 lines, got %d", n)
	}
	code, _, errOut = e.run(t, "logs", "agent-9")
	if code != cli.ExitUnknownAgent || !strings.Contains(errOut, "agent-9") || !strings.Contains(errOut, "not running") {
		t.Fatalf("an agent not there: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"logs"}, {"logs", "../x"}, {"logs", "agent-1", "--lines", "0"}, {"logs", "agent-1", "--lines", "201"}, {"top", "--every", "1ms"}} {
		code, _, errOut := e.run(t, args...)
		if code != cli.ExitUsage || errOut == "" {
			t.Fatalf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// top --once (what a pipe gets): one frame with what the bus says.
func TestTopOnceShowsTheFlock(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 3)
	self, _ := os.Executable()
	e.spend(t, "agent-2", 600, 1000)
	if code, _, _ := e.run(t, "task", "--agent", "agent-3", "--", self, "tool", "exit", "3"); code != cli.ExitTaskFailed {
		t.Fatalf("the failing task: exit %d", code)
	}
	code, out, errOut := e.run(t, "top", "--once", "--every", "1200ms")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"3 agents", "bus: ok", "agent-1", "agent-2", "agent-3", "600/1000 [██████····]", "ready", "board: no tasks"} {
		if !strings.Contains(out, want) {
			t.Errorf("the frame lacks %q:\n%s", want, out)
		}
	}
}

// The dashboard as a person uses it: in a terminal (tmux), reading the
// screen, pressing keys.
func TestTopInATerminal(t *testing.T) {
	t.Parallel()
	testkit.SkipInShort(t, "runs the dashboard in tmux")
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("FLOCK_REQUIRE_DOCKER") == "1" {
			t.Fatal("tmux is not installed (tests/setup.sh installs it)")
		}
		t.Skip("tmux is not installed")
	}
	e := liveFlock(t, 3)
	self, _ := os.Executable()
	e.spend(t, "agent-2", 600, 1000)
	go func() {
		_, _, _ = e.run(t, "task", "--agent", "agent-1", "--id", "long-build", "--timeout", "60s", "--", self, "tool", "sleep", "30")
	}()

	session := fmt.Sprintf("flock-top-%d", os.Getpid())
	cmd := fmt.Sprintf("FLOCK_CLI=1 FLOCK_NATS_URL=%s FLOCK_NKEY_FILE=%s %s top --every 300ms", e.env["FLOCK_NATS_URL"], e.env["FLOCK_NKEY_FILE"], self)
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tm("new-session", "-d", "-s", session, "-x", "150", "-y", "40", cmd)
	t.Cleanup(func() { _ = exec.Command(tmux, "kill-session", "-t", session).Run() })
	screen := func() string { return tm("capture-pane", "-p", "-t", session) }
	see := func(what string, ok func(string) bool) string {
		t.Helper()
		var s string
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if s = screen(); ok(s) {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("the screen never showed %s:\n%s", what, s)
		return ""
	}
	has := func(subs ...string) func(string) bool {
		return func(s string) bool {
			for _, sub := range subs {
				if !strings.Contains(s, sub) {
					return false
				}
			}
			return true
		}
	}
	row := func(s, id string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, " "+id+" ") {
				return l
			}
		}
		return ""
	}

	see("every agent, the running task and the spend", has("3 agents", "bus: ok", "long-build", "600/1000"))
	// A failure shows as it happens.
	if code, out, errOut := e.run(t, "task", "--agent", "agent-3", "--id", "bad-test", "--wait", "20s", "--", self, "tool", "exit", "3"); code != cli.ExitTaskFailed {
		_, logs, _ := e.run(t, "logs", "agent-3")
		t.Fatalf("the failing task: exit %d: %s %s\nagent-3's log:\n%s\n%s", code, out, errOut, logs, screen())
	}
	s := see("the failure", has("bad-test", "exit 3"))
	if r := row(s, "agent-1"); !strings.Contains(r, "long-build") || !strings.Contains(r, "ready") {
		t.Fatalf("agent-1's row: %q\n%s", r, s)
	}
	if r := row(s, "agent-3"); !strings.Contains(r, " 1 ") {
		t.Fatalf("agent-3's row counts no failure: %q", r)
	}
	// s cycles the sort: agent, state, task, heartbeat, tokens.
	for range 4 {
		tm("send-keys", "-t", session, "s")
	}
	s = see("the sort by tokens", has("sort: tokens"))
	var first string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "agent-") && !strings.Contains(l, "recent") && !strings.Contains(l, "bad-test") {
			first = l
			break
		}
	}
	if !strings.Contains(first, "agent-2") {
		t.Fatalf("sorted by tokens, agent-2 is not first: %q\n%s", first, s)
	}
	// / filters.
	tm("send-keys", "-t", session, "/", "agent-3", "Enter")
	s = see("the filter", has("filter: agent-3"))
	if row(s, "agent-1") != "" || row(s, "agent-3") == "" {
		t.Fatalf("filtered to agent-3:\n%s", s)
	}
	tm("send-keys", "-t", session, "Escape")
	see("the filter cleared", has("filter: -"))
	// enter opens the selected agent's log lines, asked over the bus.
	tm("send-keys", "-t", session, "s", "s") // back to the sort by agent
	see("the sort by agent", has("sort: agent"))
	tm("send-keys", "-t", session, "Up", "Up", "Up", "Down")
	s = see("agent-2 selected", func(s string) bool { return strings.HasPrefix(strings.TrimSpace(row(s, "agent-2")), ">") })
	tm("send-keys", "-t", session, "Enter")
	s = see("agent-2's log lines", has("logs of agent-2", `"msg":"agent ready"`))
	if strings.Contains(s, `"agent":"agent-1"`) {
		t.Fatalf("agent-2's logs show agent-1's lines:\n%s", s)
	}
	tm("send-keys", "-t", session, "Escape")
	see("the table again", has("sort: agent"))
	tm("send-keys", "-t", session, "q")
	testkit.WaitFor(t, 5*time.Second, "top to quit on q", func() bool {
		return exec.Command(tmux, "has-session", "-t", session).Run() != nil
	})
}

// A task sent again with an ID the bus saw within its duplicate window is
// not stored again: the CLI says so at once, naming the ID, instead of
// waiting out a result that will not come.
func TestATaskIDUsedAgainIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 1)
	if code, _, errOut := e.run(t, "task", "--agent", "agent-1", "--id", "once", "--kind", "echo", "--", "x"); code != cli.ExitOK {
		t.Fatalf("the first: exit %d: %s", code, errOut)
	}
	start := time.Now()
	code, _, errOut := e.run(t, "task", "--agent", "agent-1", "--id", "once", "--kind", "echo", "--", "x")
	if code != cli.ExitUsage || !strings.Contains(errOut, `"once"`) || !strings.Contains(errOut, "give another ID") || time.Since(start) > 5*time.Second {
		t.Fatalf("the same ID again: exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), errOut)
	}
	if code, _, errOut := e.run(t, "task", "--agent", "agent-1", "--id", "twice", "--kind", "echo", "--", "x"); code != cli.ExitOK {
		t.Fatalf("a new ID: exit %d: %s", code, errOut)
	}
}

// On a three-node bus the dashboard's bus line names the task stream's
// nodes and leader, and a node lost shows as one not current.
func TestTopShowsTheBusNodes(t *testing.T) {
	t.Parallel()
	testkit.SkipInShort(t, "starts a three-node bus")
	f := bustest.StartCluster(t, bustest.Agents(1))
	e := &flockEnv{f: f, shared: t.TempDir()}
	e.env = map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, protocol.OperatorUser)}
	frame := func() string {
		code, out, errOut := e.run(t, "top", "--once", "--every", "200ms")
		if code != cli.ExitOK {
			t.Fatalf("top --once: exit %d: %s", code, errOut)
		}
		return out
	}
	testkit.WaitFor(t, 20*time.Second, "every node current", func() bool { return strings.Contains(frame(), "nodes 3/3 current, leader ") })
	// Stop a node the operator is not connected to, that does not lead.
	out := frame()
	leader := regexp.MustCompile(`leader (\S+)`).FindStringSubmatch(out)[1]
	for _, n := range f.Nodes {
		if !strings.Contains(out, fmt.Sprintf(":%d ", n.ClientPort)) && !strings.HasSuffix(leader, fmt.Sprintf("bus-%d", n.Num)) {
			f.Stop(t, n.Num)
			break
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the lost node shown", func() bool { return strings.Contains(frame(), "nodes 2/3 current") })
	t.Logf("%s", strings.SplitN(frame(), "\n", 2)[0])
}
