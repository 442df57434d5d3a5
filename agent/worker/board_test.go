package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The board loop against a fake board service: a plain nats-server (no
// permissions, JetStream on, the agent's task stream and consumer made by
// hand), a responder on the board's agent subjects that hands out the run
// tasks queued in it and records every request, and agent-1 in process.

// boardBus is a plain bus with a fake board on it.
type boardBus struct {
	t      *testing.T
	url    string
	seed   string // agent-1's seed file
	nc     *nats.Conn
	js     jetstream.JetStream
	shared string
	events chan protocol.Event
	hb     chan protocol.Heartbeat
	board  *fakeBoard
}

func startBoardBus(t *testing.T) *boardBus {
	t.Helper()
	agentKP, _ := nkeys.CreateUser()
	agentPub, _ := agentKP.PublicKey()
	seed, _ := agentKP.Seed()
	boardKP, _ := nkeys.CreateUser()
	boardPub, _ := boardKP.PublicKey()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Nkeys: []*server.NkeyUser{{Nkey: agentPub}, {Nkey: boardPub}},
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	b := &boardBus{t: t, url: srv.ClientURL(), shared: t.TempDir(),
		events: make(chan protocol.Event, 1024), hb: make(chan protocol.Heartbeat, 1024), board: &fakeBoard{byOp: map[string]int{}}}
	b.seed = filepath.Join(t.TempDir(), "agent-1.nk")
	if err := os.WriteFile(b.seed, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if b.nc, err = nats.Connect(b.url, nats.Nkey(boardPub, boardKP.Sign)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.nc.Close)
	if b.js, err = jetstream.New(b.nc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, subj := range map[string]string{protocol.StreamTasks: "tasks.>", "RESULTS": "task.result.>"} {
		if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.js.CreateConsumer(ctx, protocol.StreamTasks, jetstream.ConsumerConfig{
		Durable: protocol.AgentConsumer("agent-1"), FilterSubjects: []string{protocol.TaskSubject("agent-1"), protocol.SubjectTasksAll},
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 2,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.nc.Subscribe(protocol.EventsSubject("agent-1"), func(m *nats.Msg) {
		var ev protocol.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			b.events <- ev
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.nc.Subscribe(protocol.HeartbeatSubject("agent-1"), func(m *nats.Msg) {
		var hb protocol.Heartbeat
		if json.Unmarshal(m.Data, &hb) == nil {
			select {
			case b.hb <- hb:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// serve makes the fake board answer.
func (b *boardBus) serve() {
	b.t.Helper()
	if _, err := b.nc.Subscribe(protocol.SubjectBoardAgentRequests, b.board.handle); err != nil {
		b.t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil {
		b.t.Fatal(err)
	}
}

// ring tells the agents a task became ready.
func (b *boardBus) ring() {
	if err := b.nc.Publish(protocol.SubjectBoardReady, nil); err != nil {
		b.t.Fatal(err)
	}
}

type boardAgent struct {
	cancel context.CancelFunc
	done   chan error
	log    *syncbuf.Buffer
}

// start runs agent-1 and waits until it is ready.
func (b *boardBus) start(mod func(*worker.Config)) *boardAgent {
	b.t.Helper()
	cfg := worker.Config{
		ID: "agent-1", URL: b.url, SharedDir: b.shared, NkeyFile: b.seed, Heartbeat: time.Second, Concurrency: 1,
		LogFile: "-", LogLevel: "debug", Grace: 5 * time.Second, StatusFile: filepath.Join(b.shared, "run", "agent-1.status"),
	}
	if mod != nil {
		mod(&cfg)
	}
	a := &boardAgent{done: make(chan error, 1), log: &syncbuf.Buffer{}}
	var ctx context.Context
	ctx, a.cancel = context.WithCancel(context.Background())
	log := slog.New(slog.NewJSONHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { a.done <- worker.Run(ctx, cfg, log) }()
	b.t.Cleanup(func() { a.stop(b.t) })
	b.waitEvent(protocol.EventReady, "", 10*time.Second)
	return a
}

func (a *boardAgent) stop(t *testing.T) {
	a.cancel()
	select {
	case err := <-a.done:
		if err != nil {
			t.Errorf("agent: %v", err)
		}
		a.done <- nil
	case <-time.After(15 * time.Second):
		t.Error("agent did not stop")
	}
}

// noWarnings fails if the agent logged a warning or an error about the board.
func (a *boardAgent) noWarnings(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(line, "board") && (strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)) {
			t.Errorf("logged: %s", line)
		}
	}
}

// waitEvent waits for agent-1's event of type typ (about ref, when given).
func (b *boardBus) waitEvent(typ, ref string, d time.Duration) protocol.Event {
	b.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev := <-b.events:
			if ev.Type == typ && (ref == "" || ev.Ref == ref) {
				return ev
			}
		case <-timeout:
			b.t.Fatalf("no %s event for %q within %s", typ, ref, d)
		}
	}
}

// fakeBoard hands out the tasks queued in it, one per claim, and records
// every request.
type fakeBoard struct {
	mu    sync.Mutex
	queue []protocol.BoardReply
	held  map[string]*protocol.BoardTask
	reqs  []boardReq
	byOp  map[string]int
	empty string        // the code of a claim that finds nothing queued (protocol.BoardErrNothing when "")
	lease time.Duration // the lease its replies say (none when 0)
}

type boardReq struct {
	Caller, Op string
	Req        protocol.BoardRequest
	At         time.Time
}

func (f *fakeBoard) add(task protocol.BoardTask, context ...protocol.BoardTask) {
	f.mu.Lock()
	defer f.mu.Unlock()
	task.V, task.Status = protocol.Version, protocol.BoardReady
	f.queue = append(f.queue, protocol.BoardReply{V: protocol.Version, Task: &task, Context: context})
}

func (f *fakeBoard) handle(m *nats.Msg) {
	caller, op, ok := protocol.BoardCaller(m.Subject)
	var req protocol.BoardRequest
	if !ok || json.Unmarshal(m.Data, &req) != nil {
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, boardReq{caller, op, req, time.Now()})
	f.byOp[op]++
	rep := protocol.BoardReply{V: protocol.Version, Lease: protocol.Duration(f.lease)}
	if f.held == nil {
		f.held = map[string]*protocol.BoardTask{}
	}
	switch {
	case op == protocol.BoardOpAbandon:
		rep.Tasks = []protocol.BoardTask{}
		for k, t := range f.held {
			if t.Holder == caller {
				t.Status, t.Holder, t.Reason = protocol.BoardReady, "", "abandoned"
				rep.Tasks = append(rep.Tasks, *t)
				delete(f.held, k)
			}
		}
	case op == protocol.BoardOpRenewAll:
		rep.Tasks = []protocol.BoardTask{}
		for _, t := range f.held {
			if t.Holder == caller && (req.Kind == "" || t.Kind() == req.Kind) {
				rep.Tasks = append(rep.Tasks, *t)
			}
		}
	case op == protocol.BoardOpClaim && len(f.queue) > 0 && req.Kind == protocol.BoardKindRun:
		rep = f.queue[0]
		rep.Lease = protocol.Duration(f.lease)
		f.queue = f.queue[1:]
		rep.Task.Attempts++
		rep.Task.Status, rep.Task.Holder = protocol.BoardClaimed, caller
		f.held[rep.Task.Key()] = rep.Task
	case op == protocol.BoardOpClaim:
		rep.Error, rep.Code = "nothing is ready for "+caller, protocol.BoardErrNothing
		if f.empty != "" {
			rep.Error, rep.Code = caller+" holds its claim limit", f.empty
		}
	case f.held[protocol.BoardKey(req.Plan, req.Task)] != nil:
		rep.Task = f.held[protocol.BoardKey(req.Plan, req.Task)]
	default:
		rep.Error, rep.Code = "not held", protocol.BoardErrNotHolder
	}
	f.mu.Unlock()
	b, _ := json.Marshal(rep)
	_ = m.Respond(b)
}

func (f *fakeBoard) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byOp[op]
}

func (f *fakeBoard) requests(op string) []boardReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []boardReq
	for _, r := range f.reqs {
		if r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// wait waits for the request op about plan.task.
func (f *fakeBoard) wait(t *testing.T, op, plan, task string, d time.Duration) boardReq {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, r := range f.requests(op) {
			if r.Req.Plan == plan && r.Req.Task == task {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s of %s.%s within %s; requests: %+v", op, plan, task, d, f.reqs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runTask(plan, id string, timeout time.Duration, run ...string) protocol.BoardTask {
	return protocol.BoardTask{Plan: plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: id, Run: run, Timeout: protocol.Duration(timeout)}, CreatedBy: protocol.OperatorUser}
}

// An idle agent claims a run task, runs it in a task directory of its own
// with the dependencies' results in context.json, and completes it with the
// tail of its stdout; busy with a task of its consumer (one slot), it claims
// nothing until that task is done.
func TestBoardRunTaskCompletesWhenIdle(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.serve()
	a := b.start(nil)
	testkit.WaitFor(t, 10*time.Second, "the first claim", func() bool { return b.board.count(protocol.BoardOpClaim) >= 1 })

	// Busy: a task of its consumer holds the only slot.
	mark := filepath.Join(b.shared, "busy")
	body, _ := json.Marshal(tool("busy", "sleep", "700ms", "--mark", mark))
	if _, err := b.js.Publish(context.Background(), protocol.TaskSubject("agent-1"), body); err != nil {
		t.Fatal(err)
	}
	waitFile(t, mark, 10*time.Second)
	claims := b.board.count(protocol.BoardOpClaim)
	dep := protocol.BoardTask{Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "a"}, Status: protocol.BoardDone, Holder: "agent-2",
		Result: &protocol.BoardResult{Summary: "what a found"}}
	b.board.add(runTask("p", "build", 0, self, "tool", "env"), dep)
	b.board.add(runTask("p", "big", 0, self, "tool", "output", "10000"))
	busySince := time.Now()
	for range 3 {
		b.ring()
		time.Sleep(50 * time.Millisecond)
	}
	if n := b.board.count(protocol.BoardOpClaim); n != claims {
		t.Fatalf("%d claims while the consumer's task held the slot", n-claims)
	}

	// Idle again: it claims at once, both tasks one after the other.
	done := b.board.wait(t, protocol.BoardOpComplete, "p", "build", 10*time.Second)
	if claim := b.board.requests(protocol.BoardOpClaim)[claims]; claim.At.Sub(busySince) < 500*time.Millisecond || claim.Req.Kind != protocol.BoardKindRun || claim.Caller != "agent-1" {
		t.Fatalf("claim %+v, %s after the busy task started", claim, claim.At.Sub(busySince))
	}
	dir := filepath.Join(b.shared, "agents", "agent-1", "tasks", "board-p.build-1")
	res := done.Req.Result
	if res == nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("complete: %+v", done.Req)
	}
	for _, want := range []string{"FLOCK_BOARD_PLAN=p\n", "FLOCK_BOARD_TASK=build\n", "FLOCK_BOARD_CONTEXT=" + filepath.Join(dir, "context.json") + "\n",
		"FLOCK_TASK_DIR=" + dir + "\n", "FLOCK_TASK_ATTEMPT=1\n", "FLOCK_AGENT_ID=agent-1\n"} {
		mustContain(t, "summary", res.Summary, want)
	}
	if got := testkit.ReadFile(t, filepath.Join(dir, "stdout")); !strings.HasSuffix(got, res.Summary) {
		t.Fatalf("the summary is not stdout's tail:\n%s\nvs\n%s", res.Summary, got)
	}
	var ctxFile []protocol.BoardTask
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(dir, "context.json"))), &ctxFile); err != nil || len(ctxFile) != 1 || ctxFile[0].ID != "a" || ctxFile[0].Result.Summary != "what a found" {
		t.Fatalf("context.json: %+v %v", ctxFile, err)
	}
	var onDisk protocol.Result
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(dir, "result.json"))), &onDisk); err != nil || onDisk.Status != protocol.StatusOK || onDisk.Subject != "board:p.build" {
		t.Fatalf("result.json: %+v %v", onDisk, err)
	}
	var asGiven protocol.BoardTask
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(dir, "task.json"))), &asGiven); err != nil || asGiven.Key() != "p.build" {
		t.Fatalf("task.json: %+v %v", asGiven, err)
	}
	b.waitEvent(protocol.EventBoardClaimed, "p.build", 5*time.Second)
	b.waitEvent(protocol.EventBoardDone, "p.build", 5*time.Second)

	// The summary is the end of stdout, at most MaxBoardSummary bytes.
	big := b.board.wait(t, protocol.BoardOpComplete, "p", "big", 10*time.Second).Req.Result
	out := testkit.ReadFile(t, filepath.Join(b.shared, "agents", "agent-1", "tasks", "board-p.big-1", "stdout"))
	if len(out) != 10000 || big.Summary != out[len(out)-protocol.MaxBoardSummary:] {
		t.Fatalf("summary of 10000 bytes of output: %d bytes ending %q", len(big.Summary), big.Summary[max(0, len(big.Summary)-8):])
	}
	if n := len(b.board.requests(protocol.BoardOpFail)) + len(b.board.requests(protocol.BoardOpRelease)); n != 0 {
		t.Fatalf("%d fail or release requests", n)
	}
	a.noWarnings(t)
}

// A command that fails, one that runs out of time and one that cannot start
// fail their tasks, each with the reason, stderr's tail and the exit code.
func TestBoardFailedRunsFailTheTask(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.serve()
	b.board.add(runTask("p", "exit", 0, self, "tool", "read", "/no/such/file"))
	b.board.add(runTask("p", "slow", 300*time.Millisecond, self, "tool", "sleep", "10s"))
	b.board.add(runTask("p", "nocmd", 0, "/no/such/command"))
	b.start(nil)

	r := b.board.wait(t, protocol.BoardOpFail, "p", "exit", 10*time.Second).Req
	if r.Reason != "exit code 1" || r.Result == nil || r.Result.ExitCode == nil || *r.Result.ExitCode != 1 || !strings.Contains(r.Result.Summary, "no such file") {
		t.Fatalf("fail of a command that exits 1: %+v %+v", r, r.Result)
	}
	r = b.board.wait(t, protocol.BoardOpFail, "p", "slow", 10*time.Second).Req
	if !strings.HasPrefix(r.Reason, "timeout: ") || !strings.Contains(r.Reason, "300ms") {
		t.Fatalf("fail of a command past its timeout: %+v", r)
	}
	r = b.board.wait(t, protocol.BoardOpFail, "p", "nocmd", 10*time.Second).Req
	if !strings.Contains(r.Reason, "/no/such/command") {
		t.Fatalf("fail of a command that cannot start: %+v", r)
	}
	ev := b.waitEvent(protocol.EventBoardFailed, "p.exit", 5*time.Second)
	if ev.Detail != "exit code 1" {
		t.Fatalf("event %+v", ev)
	}
	if n := b.board.count(protocol.BoardOpComplete); n != 0 {
		t.Fatalf("%d completes", n)
	}
}

// A long task's lease is renewed while it runs (every third of the
// board's lease), and the heartbeat names the task held.
func TestBoardRenewsTheLeaseWhileItRuns(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.board.lease = 1500 * time.Millisecond
	b.serve()
	b.board.add(runTask("p", "long", time.Minute, self, "tool", "sleep", "1s"))
	b.start(func(c *worker.Config) { c.Heartbeat = 100 * time.Millisecond })
	held := false
	timeout := time.After(5 * time.Second)
	for !held {
		select {
		case hb := <-b.hb:
			held = hb.Board == "p.long" && hb.Running == 1
		case <-timeout:
			t.Fatal("no heartbeat names the board task held")
		}
	}
	done := b.board.wait(t, protocol.BoardOpComplete, "p", "long", 10*time.Second)
	renews := b.board.requests(protocol.BoardOpRenew)
	if len(renews) < 1 || len(renews) > 3 {
		t.Fatalf("%d renewals of a 1 s run with a lease of 1.5 s, want 2 (every 500 ms)", len(renews))
	}
	for _, r := range renews {
		if r.Req.Plan != "p" || r.Req.Task != "long" || !r.At.Before(done.At) {
			t.Fatalf("renewal %+v (complete at %s)", r, done.At)
		}
	}
}

// A drain stops claiming; the board task still running when the grace
// period ends is stopped and released, not completed or failed.
func TestBoardTaskRunningAtDrainIsReleased(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.serve()
	mark := filepath.Join(b.shared, "started")
	b.board.add(runTask("p", "forever", 0, self, "tool", "sleep", "30s", "--mark", mark))
	a := b.start(func(c *worker.Config) { c.Grace = 200 * time.Millisecond })
	waitFile(t, mark, 10*time.Second)
	claims := b.board.count(protocol.BoardOpClaim)
	start := time.Now()
	a.stop(t)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("stopping took %s with a grace period of 200 ms", d)
	}
	r := b.board.wait(t, protocol.BoardOpRelease, "p", "forever", time.Second).Req
	if r.Reason == "" {
		t.Fatalf("release without a reason: %+v", r)
	}
	if n := b.board.count(protocol.BoardOpComplete) + b.board.count(protocol.BoardOpFail); n != 0 {
		t.Fatalf("%d complete or fail requests for a released task", n)
	}
	if n := b.board.count(protocol.BoardOpClaim); n != claims {
		t.Fatalf("%d claims during the drain", n-claims)
	}
	b.waitEvent(protocol.EventBoardReleased, "p.forever", time.Second)
}

// With BOARD=off the agent never asks the board.
func TestBoardOffNeverClaims(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.serve()
	b.board.add(runTask("p", "x", 0, self, "tool", "echo", "hi"))
	b.start(func(c *worker.Config) { c.NoBoard = true; c.BoardPoll = 100 * time.Millisecond })
	for range 5 {
		b.ring()
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(b.board.requests(protocol.BoardOpClaim)); n != 0 {
		t.Fatalf("%d claims with the board off", n)
	}
}

// "Nothing to claim", "no board service" and "the agent holds its claim
// limit" (its program holds a prompt task) are normal: no warning, and no
// busy loop however often the board rings.
func TestBoardNothingToClaimIsQuiet(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	a := b.start(func(c *worker.Config) { c.BoardPoll = 100 * time.Millisecond })
	time.Sleep(300 * time.Millisecond) // no responders: a few polls
	mustContain(t, "log", a.log.String(), "no board service answers")

	b.serve()
	for _, code := range []string{protocol.BoardErrNothing, protocol.BoardErrLimit} {
		b.board.mu.Lock()
		b.board.empty = code
		b.board.mu.Unlock()
		before := b.board.count(protocol.BoardOpClaim)
		start := time.Now()
		for time.Since(start) < 600*time.Millisecond {
			b.ring()
			time.Sleep(10 * time.Millisecond)
		}
		n := b.board.count(protocol.BoardOpClaim) - before
		if n < 1 || n > 4 {
			t.Fatalf("%d claims in 600 ms of rings every 10 ms, all refused (%s): want a few (one per 250 ms at most)", n, code)
		}
	}
	a.noWarnings(t)
}

// twoAgentsOnTheBoard runs agent-1 and agent-2 on a real bus, whose board
// service they take tasks from, and returns the operator's board client.
func twoAgentsOnTheBoard(t *testing.T) (*env, *board.Client) {
	t.Helper()
	e := newEnv(t, flockWith(2, nil))
	e.start("agent-1")
	e.start("agent-2")
	return e, board.NewOperatorClient(e.op)
}

// The real board service on a real bus (its permissions too): the operator
// applies a plan of three run tasks, a then b and c, which need a; two
// agents run it to done, b and c each with a's result in context.json.
func TestBoardPlanRunsToDoneOnTheRealService(t *testing.T) {
	t.Parallel()
	e, cl := twoAgentsOnTheBoard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	readCtx := []string{self, "tool", "read", "context.json"}
	if _, err := cl.Apply(ctx, protocol.BoardPlan{Plan: "demo", Tasks: []protocol.BoardTaskSpec{
		{ID: "a", Run: []string{self, "tool", "echo", "a was here"}},
		{ID: "b", Run: readCtx, Needs: []string{"a"}},
		{ID: "c", Run: readCtx, Needs: []string{"a"}},
	}}); err != nil {
		t.Fatal(err)
	}
	var tasks []protocol.BoardTask
	for {
		var err error
		if tasks, err = cl.List(ctx, "demo"); err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, task := range tasks {
			if task.Status == protocol.BoardFailed || task.Status == protocol.BoardCancelled {
				t.Fatalf("task %s %s: %s %+v", task.ID, task.Status, task.Reason, task.Result)
			}
			if task.Status == protocol.BoardDone {
				done++
			}
		}
		if done == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the plan is not done: %+v", tasks)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, task := range tasks {
		r := task.Result
		if r == nil || r.ExitCode == nil || *r.ExitCode != 0 || (task.Holder != "agent-1" && task.Holder != "agent-2") {
			t.Fatalf("task %s done by %q with %+v", task.ID, task.Holder, r)
		}
		if task.ID == "a" {
			if r.Summary != "a was here\n" {
				t.Fatalf("a's summary %q", r.Summary)
			}
			continue
		}
		// b and c printed their context: a, with its result.
		var seen []protocol.BoardTask
		file := filepath.Join(e.shared, "agents", task.Holder, "tasks", fmt.Sprintf("board-demo.%s-%d", task.ID, task.Attempts), "context.json")
		if err := json.Unmarshal([]byte(testkit.ReadFile(t, file)), &seen); err != nil || len(seen) != 1 || seen[0].ID != "a" || seen[0].Result == nil || seen[0].Result.Summary != "a was here\n" {
			t.Fatalf("%s's context.json: %+v %v", task.ID, seen, err)
		}
		mustContain(t, task.ID+"'s summary", r.Summary, `"summary": "a was here\n"`)
	}
}

// Artifacts pass between run tasks through the board's store: a leaves
// artifacts/out.txt in its directory, the runtime puts it on the board when
// a succeeds, and writes it to b's directory as needs/a/out.txt before b
// (which needs a) starts, on whichever agent.
func TestBoardArtifactsPassBetweenRunTasks(t *testing.T) {
	t.Parallel()
	_, cl := twoAgentsOnTheBoard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Apply(ctx, protocol.BoardPlan{Plan: "art", Tasks: []protocol.BoardTaskSpec{
		{ID: "a", Run: []string{self, "tool", "write", "artifacts/out.txt", "made by a"}},
		{ID: "b", Run: []string{self, "tool", "read", "needs/a/out.txt"}, Needs: []string{"a"}},
	}}); err != nil {
		t.Fatal(err)
	}
	var b protocol.BoardTask
	for {
		got, err := cl.Show(ctx, "art", "b")
		if err != nil {
			t.Fatal(err)
		}
		if b = *got; b.Status == protocol.BoardDone || b.Status == protocol.BoardFailed || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.Status != protocol.BoardDone || b.Result == nil || b.Result.Summary != "made by a" {
		t.Fatalf("b: %s %s %+v: want done, having read a's artifact", b.Status, b.Reason, b.Result)
	}
	a, err := cl.Show(ctx, "art", "a")
	if err != nil || a.Result == nil || len(a.Result.Artifacts) != 1 || a.Result.Artifacts[0] != "out.txt" {
		t.Fatalf("a's result names its artifacts: %+v %v", a, err)
	}
	data, art, err := cl.Get(ctx, "art", "a", "out.txt")
	if err != nil || string(data) != "made by a" || art.By != a.Holder {
		t.Fatalf("the operator's get of a's artifact: %q %+v %v", data, art, err)
	}
}

// An agent's own run subtasks, in its namespace (agent-1/<id>), run as the
// operator's do: a run task of the operator's adds agent-1/made (which
// leaves an artifact) with `flock-agent board add`, the next adds
// agent-1/read, which needs it and reads the artifact from
// needs/agent-1.made/ in its directory, board-art.agent-1.read-1.
func TestAgentSubtasksRunInTheirNamespace(t *testing.T) {
	t.Parallel()
	e, cl := twoAgentsOnTheBoard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	add := func(under, id string, needs string, run ...string) []string {
		return append([]string{self, "board", "add", "art", under, "--id", id, "--assignee", "agent-1", "--needs", needs, "--run", "--"}, run...)
	}
	if _, err := cl.Apply(ctx, protocol.BoardPlan{Plan: "art", Tasks: []protocol.BoardTaskSpec{
		{ID: "a", Assignee: "agent-1", Run: add("a", "made", "", self, "tool", "write", "artifacts/out.txt", "made by agent-1/made")},
		{ID: "b", Assignee: "agent-1", Needs: []string{"a"}, Run: add("b", "read", "agent-1/made", self, "tool", "read", "needs/agent-1.made/out.txt")},
	}}); err != nil {
		t.Fatal(err)
	}
	var read *protocol.BoardTask
	defer func() {
		if read == nil {
			tasks, _ := cl.List(context.Background(), "art")
			for _, task := range tasks {
				t.Logf("%s %s %s %+v", task.ID, task.Status, task.Reason, task.Result)
			}
		}
	}()
	testkit.WaitFor(t, 25*time.Second, "agent-1/read done", func() bool {
		got, err := cl.Show(ctx, "art", "agent-1/read")
		if err == nil && (got.Status == protocol.BoardDone || got.Status == protocol.BoardFailed) {
			read = got
		}
		return read != nil
	})
	if read.Status != protocol.BoardDone || read.Result == nil || read.Result.Summary != "made by agent-1/made" || read.CreatedBy != "agent-1" || read.Parent != "b" {
		t.Fatalf("agent-1/read: %s %s %+v: want done, having read agent-1/made's artifact", read.Status, read.Reason, read.Result)
	}
	dir := filepath.Join(e.shared, "agents", "agent-1", "tasks", "board-art.agent-1.read-1")
	if got := testkit.ReadFile(t, filepath.Join(dir, "needs", "agent-1.made", "out.txt")); got != "made by agent-1/made" {
		t.Fatalf("the needed artifact in %s: %q", dir, got)
	}
	if data, art, err := cl.Get(ctx, "art", "agent-1/made", "out.txt"); err != nil || string(data) != "made by agent-1/made" || art.Task != "agent-1/made" {
		t.Fatalf("the operator's get of agent-1/made's artifact: %q %+v %v", data, art, err)
	}
}

// A runtime that starts gives back what its agent held before (a killed
// container's claims) before it claims anything.
func TestBoardClaimsHeldBeforeAStartAreGivenBack(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.board.held = map[string]*protocol.BoardTask{"p.old": {Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "old", Prompt: "x"}, Status: protocol.BoardClaimed, Holder: "agent-1"}}
	b.serve()
	a := b.start(nil)
	ev := b.waitEvent(protocol.EventBoardReleased, "p.old", 5*time.Second)
	if !strings.Contains(ev.Detail, "given back at start") {
		t.Fatalf("event %+v", ev)
	}
	testkit.WaitFor(t, 5*time.Second, "a claim", func() bool { return b.board.count(protocol.BoardOpClaim) > 0 })
	abandons, claims := b.board.requests(protocol.BoardOpAbandon), b.board.requests(protocol.BoardOpClaim)
	if len(abandons) != 1 || len(claims) == 0 || !abandons[0].At.Before(claims[0].At) {
		t.Fatalf("%d abandons, %d claims (the abandon first): %+v", len(abandons), len(claims), b.board.reqs)
	}
	a.noWarnings(t)
}

// The prompt tasks an agent's program claimed are renewed while the
// program runs, and not while it is down (they lapse within a lease).
func TestBoardPromptClaimsAreRenewedWhileTheProgramRuns(t *testing.T) {
	t.Parallel()
	b := startBoardBus(t)
	b.board.lease = 300 * time.Millisecond
	b.serve()
	b.start(func(c *worker.Config) { c.Program = []string{self, "tool", "sleep", "1s"} })
	b.waitEvent(protocol.EventProgramExited, "", 10*time.Second)
	exited := time.Now()
	time.Sleep(700 * time.Millisecond) // within the restart's backoff of a second
	during, after := 0, 0
	for _, r := range b.board.requests(protocol.BoardOpRenewAll) {
		if r.Req.Kind != protocol.BoardKindPrompt {
			t.Fatalf("renew-all of kind %q", r.Req.Kind)
		}
		switch {
		case r.At.Before(exited):
			during++
		case r.At.After(exited.Add(150 * time.Millisecond)):
			after++
		}
	}
	if during < 4 || after != 0 {
		t.Fatalf("%d renewals while a 1 s program ran (every 100 ms), %d while it was down", during, after)
	}
}
