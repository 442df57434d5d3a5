package board_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// clock is the board's clock in a test: it moves when the test says.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a real bus (rendered config, permissions and topology) whose board
// reads a test clock and sweeps every 10 ms, and the operator's client.
type env struct {
	f   *bustest.Bus
	clk *clock
	op  *board.Client
	nc  *nats.Conn // the operator's connection
}

// start's board admits each agent's requests far past their default
// bounds (admission.go): the tests of the board's rules send requests
// faster, and more at once, than an agent would; the tests of those bounds
// (admission_test.go) start with them.
func start(t testing.TB, agents int) *env {
	t.Helper()
	return startWith(t, agents, board.Options{AgentRate: 1e4, AgentInFlight: 256})
}

// startWith is start with the board's options (the clock and the sweep's
// pace are the test's own).
func startWith(t testing.TB, agents int, opt board.Options) *env {
	t.Helper()
	clk := &clock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	opt.Now, opt.SweepEvery = clk.Now, 10*time.Millisecond
	f := bustest.Start(t, bustest.Agents(agents), bustest.WithBoard(opt))
	nc := f.Connect(t, protocol.OperatorUser)
	return &env{f: f, clk: clk, op: board.NewOperatorClient(nc), nc: nc}
}

// agent is agent id's client, on a connection of its own.
func (e *env) agent(t testing.TB, id string) *board.Client {
	t.Helper()
	return board.NewAgentClient(e.f.Connect(t, id), id)
}

// setBoard changes what the topology says of the agents and reloads the
// bus, as a redeploy with new labels or limits does.
func (e *env) setBoard(t testing.TB, change func(*protocol.BoardConfig)) {
	t.Helper()
	raw, err := os.ReadFile(e.f.TopologyFile)
	if err != nil {
		t.Fatal(err)
	}
	var topo protocol.Topology
	if err := json.Unmarshal(raw, &topo); err != nil {
		t.Fatal(err)
	}
	change(&topo.Board)
	if raw, err = json.Marshal(topo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.f.TopologyFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Bus.Reload(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// The reload writes the services bucket; the board learns of it a
	// moment later, so wait until it has, or a request can beat the change.
	want := sortedBoard(topo.Board)
	testkit.WaitFor(t, 10*time.Second, "the board to apply the reloaded topology", func() bool {
		return reflect.DeepEqual(sortedBoard(e.f.Services.BoardConfig()), want)
	})
}

// sortedBoard is cfg with its agents in ID order and an empty label list as
// none, so two configs compare by what they say.
func sortedBoard(cfg protocol.BoardConfig) protocol.BoardConfig {
	out := cfg
	out.Agents = make([]protocol.BoardAgent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		if len(a.Labels) == 0 {
			a.Labels = nil
		}
		out.Agents = append(out.Agents, a)
	}
	slices.SortFunc(out.Agents, func(a, b protocol.BoardAgent) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func setAgent(cfg *protocol.BoardConfig, a protocol.BoardAgent) {
	for i := range cfg.Agents {
		if cfg.Agents[i].ID == a.ID {
			cfg.Agents[i] = a
			return
		}
	}
	cfg.Agents = append(cfg.Agents, a)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refused asserts err is the board's refusal with code.
func refused(t testing.TB, err error, code string) *protocol.BoardError {
	t.Helper()
	var be *protocol.BoardError
	if !errors.As(err, &be) {
		t.Fatalf("want a refusal %q, got %v", code, err)
	}
	if be.Code != code {
		t.Fatalf("want a refusal %q, got %q: %s", code, be.Code, be.Msg)
	}
	return be
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func prompt(id string, needs ...string) protocol.BoardTaskSpec {
	return protocol.BoardTaskSpec{ID: id, Prompt: "do " + id, Needs: needs}
}

func plan(id string, tasks ...protocol.BoardTaskSpec) protocol.BoardPlan {
	return protocol.BoardPlan{Plan: id, Tasks: tasks}
}

// apply applies p and returns the changes by task.
func (e *env) apply(t testing.TB, p protocol.BoardPlan) map[string]protocol.BoardChange {
	t.Helper()
	changes, err := e.op.Apply(ctxT(t), p)
	if err != nil {
		t.Fatalf("apply %s: %v", p.Plan, err)
	}
	out := map[string]protocol.BoardChange{}
	for _, c := range changes {
		out[c.Task] = c
	}
	return out
}

// show is the task as the operator sees it.
func (e *env) show(t testing.TB, p, id string) protocol.BoardTask {
	t.Helper()
	task, err := e.op.Show(ctxT(t), p, id)
	if err != nil {
		t.Fatalf("show %s.%s: %v", p, id, err)
	}
	return *task
}

// status asserts the task's status as the operator sees it.
func (e *env) status(t testing.TB, p, id, want string) protocol.BoardTask {
	t.Helper()
	task := e.show(t, p, id)
	if task.Status != want {
		t.Fatalf("%s.%s is %s (%s), want %s", p, id, task.Status, task.Reason, want)
	}
	return task
}

// waitStatus waits (the sweeper) until the task has status want.
func (e *env) waitStatus(t testing.TB, p, id, want string) protocol.BoardTask {
	t.Helper()
	var task protocol.BoardTask
	testkit.WaitFor(t, 5*time.Second, p+"."+id+" "+want, func() bool {
		task = e.show(t, p, id)
		return task.Status == want
	})
	return task
}

// claim claims for c and fails the test on a refusal.
func claim(t testing.TB, c *board.Client, p, id string) protocol.BoardTask {
	t.Helper()
	rep, err := c.Claim(ctxT(t), p, id, "")
	if err != nil {
		t.Fatalf("claim %s.%s: %v", p, id, err)
	}
	return *rep.Task
}

func ids(tasks []protocol.BoardTask) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.Plan+"."+t.ID)
	}
	return out
}

// listen subscribes nc to subject and returns what arrives.
func listen(t testing.TB, nc *nats.Conn, subject string) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

func quota(n int) *int { return &n }
