package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The test binary doubles as the agent binary: `<test binary> tool ...` runs
// a built-in tool (what exec tasks spawn) and `<test binary> run` runs an
// agent process (for the kill and SIGTERM tests).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "tool" || os.Args[1] == "run" || os.Args[1] == "board") {
		// As flock-agent's main: SIGTERM cancels the context (the drain).
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := cli.Main(ctx, os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

var self = func() string {
	p, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return p
}()

// tool returns an exec task running a built-in tool.
func tool(id string, args ...string) protocol.Task {
	return protocol.Task{V: 1, ID: id, Kind: protocol.KindExec, Command: self, Args: append([]string{"tool"}, args...)}
}

func echo(id, text string) protocol.Task {
	return protocol.Task{V: 1, ID: id, Kind: protocol.KindEcho, Stdin: text}
}

// env is a running flock: bus, operator connection, shared directory.
type env struct {
	t       *testing.T
	f       *bustest.Bus
	shared  string
	op      *nats.Conn
	js      jetstream.JetStream
	cl      *operator.Client
	events  chan *nats.Msg
	backlog []protocol.Event
}

func newEnv(t *testing.T, cfg flock.Config) *env {
	t.Helper()
	return envOn(t, bustest.Start(t, cfg))
}

// envOn is an environment on a running bus f; opts are the operator
// connection's.
func envOn(t *testing.T, f *bustest.Bus, opts ...nats.Option) *env {
	t.Helper()
	op := f.Connect(t, protocol.OperatorUser, opts...)
	cl, err := operator.New(op)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, f: f, shared: t.TempDir(), op: op, cl: cl, events: make(chan *nats.Msg, 4096)}
	if e.js, err = jetstream.New(op); err != nil {
		t.Fatal(err)
	}
	if _, err := op.ChanSubscribe(protocol.SubjectEvents, e.events); err != nil {
		t.Fatal(err)
	}
	if err := op.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

func flockWith(n int, mod func(*flock.Config)) flock.Config {
	c := bustest.Agents(n)
	if mod != nil {
		mod(&c)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

func logger() *slog.Logger {
	if os.Getenv("FLOCK_TEST_LOG") != "" {
		return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// config is an agent's configuration in this environment.
func (e *env) config(id string) worker.Config {
	a, ok := e.f.Model.Agent(id)
	if !ok {
		e.t.Fatalf("no agent %s in the model", id)
	}
	return worker.Config{
		ID: id, URL: e.f.URL, SharedDir: e.shared, NkeyFile: e.f.SeedFile(e.t, id),
		Heartbeat: time.Second, TaskTimeout: a.Limits.TaskTimeout, Concurrency: a.Limits.Concurrency,
		LogFile: "-", LogLevel: "debug", Grace: 5 * time.Second,
		StatusFile: filepath.Join(e.shared, "run", id+".status"),
	}
}

// agent is an agent running in this process.
type agent struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// start runs agent id in-process and waits until it is ready.
func (e *env) start(id string, mod ...func(*worker.Config)) *agent {
	e.t.Helper()
	cfg := e.config(id)
	for _, m := range mod {
		m(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- worker.Run(ctx, cfg, logger().With("agent", id)) }()
	e.t.Cleanup(func() { a.stop(e.t) })
	e.waitEvent(id, protocol.EventReady, 10*time.Second)
	return a
}

// stop cancels the agent (SIGTERM's path) and returns Run's error.
func (a *agent) stop(t *testing.T) error {
	a.once.Do(func() {
		a.cancel()
		select {
		case a.err = <-a.done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop within 30 s")
		}
	})
	return a.err
}

// spawn runs agent id as a separate process (this test binary in agent mode).
func (e *env) spawn(id string, extra ...string) *exec.Cmd {
	e.t.Helper()
	cfg := e.config(id)
	cmd := exec.Command(self, "run")
	cmd.Env = append(os.Environ(),
		"AGENT_ID="+id, "NATS_URL="+cfg.URL, "SHARED_DIR="+cfg.SharedDir, "NATS_NKEY_FILE="+cfg.NkeyFile,
		"HEARTBEAT_INTERVAL=1s", "LOG_FILE=-", "STATUS_FILE="+cfg.StatusFile, "CONCURRENCY=2", "GRACE_PERIOD=10s")
	cmd.Env = append(cmd.Env, extra...)
	if os.Getenv("FLOCK_TEST_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e.waitEvent(id, protocol.EventReady, 15*time.Second)
	return cmd
}

// waitEvent waits for agent id's event of type typ; events it skips are kept
// for later calls.
func (e *env) waitEvent(id, typ string, d time.Duration) protocol.Event {
	e.t.Helper()
	match := func(ev protocol.Event) bool { return ev.Agent == id && ev.Type == typ }
	for i, ev := range e.backlog {
		if match(ev) {
			e.backlog = append(e.backlog[:i:i], e.backlog[i+1:]...)
			return ev
		}
	}
	timeout := time.After(d)
	for {
		select {
		case m := <-e.events:
			var ev protocol.Event
			if json.Unmarshal(m.Data, &ev) != nil || m.Subject != protocol.EventsSubject(ev.Agent) {
				continue
			}
			if match(ev) {
				return ev
			}
			e.backlog = append(e.backlog, ev)
		case <-timeout:
			e.t.Fatalf("no %s event from %s within %s", typ, id, d)
		}
	}
}

// run publishes task to target and waits for its results.
func (e *env) run(target operator.Target, task protocol.Task, d time.Duration) []protocol.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := e.cl.Run(ctx, target, task, nil)
	if err != nil {
		e.t.Fatalf("task %s: %v (results so far: %+v)", task.ID, err, res)
	}
	return res
}

// publishSleeping publishes to agent-1 a task id that sleeps for d, marking
// the file markName in the shared directory as it starts, and returns the
// task's stream sequence once the mark is there.
func (e *env) publishSleeping(id, d, markName string) uint64 {
	e.t.Helper()
	mark := filepath.Join(e.shared, markName)
	b, _ := json.Marshal(tool(id, "sleep", d, "--mark", mark))
	seq := e.publishRaw(protocol.TaskSubject("agent-1"), b)
	waitFile(e.t, mark, 10*time.Second)
	return seq
}

// publishRaw publishes body on subject as the operator and returns its sequence.
func (e *env) publishRaw(subject string, body []byte) uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := e.js.Publish(ctx, subject, body)
	if err != nil {
		e.t.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

// results reads every result the bus stores so far (every agent's stream).
func (e *env) results() []protocol.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := e.cl.StoredResults(ctx, time.Time{})
	if err != nil {
		e.t.Fatalf("read results: %v", err)
	}
	return out
}

// waitResult waits for the result of the task stored at seq.
func (e *env) waitResult(ch <-chan *nats.Msg, seq uint64, d time.Duration) protocol.Result {
	e.t.Helper()
	return e.waitResults(ch, []uint64{seq}, d)[seq]
}

// waitResults waits for the results of the tasks stored at seqs (others are skipped).
func (e *env) waitResults(ch <-chan *nats.Msg, seqs []uint64, d time.Duration) map[uint64]protocol.Result {
	e.t.Helper()
	want := map[uint64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	got := map[uint64]protocol.Result{}
	timeout := time.After(d)
	for len(got) < len(want) {
		select {
		case m := <-ch:
			var r protocol.Result
			if json.Unmarshal(m.Data, &r) == nil && want[r.Seq] {
				got[r.Seq] = r
			}
		case <-timeout:
			e.t.Fatalf("results for %d of %d tasks within %s", len(got), len(want), d)
		}
	}
	return got
}

func (e *env) subscribeResults() chan *nats.Msg {
	e.t.Helper()
	ch := make(chan *nats.Msg, 4096)
	if _, err := e.op.ChanSubscribe(protocol.SubjectResults, ch); err != nil {
		e.t.Fatal(err)
	}
	if err := e.op.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return ch
}

// subscribeHeartbeats delivers agent id's heartbeats, until the test ends.
func (e *env) subscribeHeartbeats(id string) chan protocol.Heartbeat {
	e.t.Helper()
	hb := make(chan protocol.Heartbeat, 64)
	sub, err := e.op.Subscribe(protocol.HeartbeatSubject(id), func(m *nats.Msg) {
		var h protocol.Heartbeat
		if json.Unmarshal(m.Data, &h) == nil {
			select {
			case hb <- h:
			default: // a test that stopped reading must not block the connection
			}
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.op.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return hb
}

func mustContain(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%s: %q does not contain %q", what, got, want)
	}
}
