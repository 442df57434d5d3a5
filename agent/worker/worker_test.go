package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

func TestRoundTripEachRoutingMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(3, nil))
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		e.start(id)
	}

	// tasks.<id>: only that agent answers, with an echo (no process).
	res := e.run(operator.Target{Agent: "agent-2"}, echo("one", "hello agent-2"), 10*time.Second)
	if len(res) != 1 || res[0].Agent != "agent-2" || !res[0].OK() || res[0].Stdout != "hello agent-2" || res[0].Subject != "tasks.agent-2" {
		t.Fatalf("direct task: %+v", res)
	}

	// tasks.pool: one agent runs a real process, with result files.
	res = e.run(operator.Target{Pool: true}, tool("pooled", "echo", "from", "the", "pool"), 20*time.Second)
	if len(res) != 1 || !res[0].OK() || res[0].Stdout != "from the pool\n" || *res[0].ExitCode != 0 {
		t.Fatalf("pool task: %+v", res)
	}
	if len(res[0].Trace) != 32 {
		t.Fatalf("the pool task lost its trace on the way through the bus: %q", res[0].Trace)
	}
	dir := filepath.Join(e.shared, "agents", res[0].Agent, "tasks", "pooled")
	if res[0].Dir != dir {
		t.Fatalf("result dir %q, want %q", res[0].Dir, dir)
	}
	if got := testkit.ReadFile(t, filepath.Join(dir, "stdout")); got != "from the pool\n" {
		t.Fatalf("stdout file: %q", got)
	}
	var onDisk protocol.Result
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(dir, "result.json"))), &onDisk); err != nil || onDisk.Status != protocol.StatusOK || onDisk.Seq != res[0].Seq {
		t.Fatalf("result.json: %+v %v", onDisk, err)
	}

	// tasks.all: every agent answers once.
	res = e.run(operator.Target{All: true}, echo("everyone", "hi all"), 10*time.Second)
	var agents []string
	for _, r := range res {
		if !r.OK() || r.Stdout != "hi all" || r.Subject != "tasks.all" {
			t.Fatalf("all: %+v", r)
		}
		agents = append(agents, r.Agent)
	}
	sort.Strings(agents)
	if strings.Join(agents, ",") != "agent-1,agent-2,agent-3" {
		t.Fatalf("tasks.all answered by %v", agents)
	}
}

func TestPoolTaskRunByExactlyOneOfThree(t *testing.T) {
	testkit.SkipInShort(t, "slow: 24 pool tasks over three agents; make check runs it")
	t.Parallel()
	e := newEnv(t, flockWith(3, nil))
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		e.start(id)
	}
	ch := e.subscribeResults()
	const n = 24
	seqs := map[uint64]bool{}
	for i := range n {
		// Each task takes 150 ms: one agent (2 slots) alone would need 1.8 s.
		b, _ := json.Marshal(tool(fmt.Sprintf("p%02d", i), "sleep", "150ms"))
		seqs[e.publishRaw(protocol.SubjectTasksPool, b)] = true
	}
	byAgent := map[string]int{}
	seen := map[uint64]string{}
	deadline := time.After(30 * time.Second)
	for len(seen) < n {
		select {
		case m := <-ch:
			var r protocol.Result
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatal(err)
			}
			if !seqs[r.Seq] || !r.OK() {
				t.Fatalf("unexpected result %+v", r)
			}
			if prev, dup := seen[r.Seq]; dup {
				t.Fatalf("pool task seq %d ran twice: on %s and %s", r.Seq, prev, r.Agent)
			}
			seen[r.Seq] = r.Agent
			byAgent[r.Agent]++
		case <-deadline:
			t.Fatalf("only %d of %d pool results", len(seen), n)
		}
	}
	// Nothing more arrives: no task ran twice.
	select {
	case m := <-ch:
		t.Fatalf("extra result after all %d: %s", n, m.Data)
	case <-time.After(500 * time.Millisecond):
	}
	if len(byAgent) < 2 {
		t.Fatalf("the pool was not shared: %v", byAgent)
	}
	t.Logf("pool split: %v", byAgent)
	if all := e.results(); len(all) != n {
		t.Fatalf("FLOCK_RESULTS holds %d results, want %d", len(all), n)
	}
}

func TestKilledMidTaskIsRedeliveredAndCompleted(t *testing.T) {
	testkit.SkipInShort(t, "slow: kills an agent process and waits out the redelivery; make check runs it")
	t.Parallel()
	e := newEnv(t, flockWith(1, func(c *flock.Config) { c.Bus.AckWait = ptr("2s") }))
	first := e.spawn("agent-1")
	ch := e.subscribeResults()
	seq := e.publishSleeping("victim", "1s", "started-1")
	if err := first.Process.Kill(); err != nil { // SIGKILL: no drain, no nak
		t.Fatal(err)
	}
	_ = first.Wait()

	e.spawn("agent-1")
	r := e.waitResult(ch, seq, 20*time.Second)
	if !r.OK() || r.TaskID != "victim" || r.Attempt != 2 {
		t.Fatalf("redelivered task: %+v (want ok on attempt 2)", r)
	}
	time.Sleep(300 * time.Millisecond)
	n := 0
	for _, r := range e.results() {
		if r.Seq == seq {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d results for the task, want exactly 1", n)
	}
}

func waitFile(t *testing.T, p string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within %s", p, d)
}

func TestBadTasksGetErrorResultsAndAgentKeepsRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	e.start("agent-1", func(c *worker.Config) { c.MaxTaskBytes = 4 << 10 })
	ch := e.subscribeResults()
	subj := protocol.TaskSubject("agent-1")
	cases := []struct {
		name, body, want string
	}{
		{"malformed JSON", `{"v":1,"id":"m1","kind":"echo"`, "body: malformed JSON"},
		{"wrong type", `{"v":1,"id":"m2","kind":"exec","command":"x","args":"not-a-list"}`, `field "args"`},
		{"unknown kind", `{"v":1,"id":"u1","kind":"teleport"}`, `kind: unknown kind "teleport"`},
		{"oversized", `{"v":1,"id":"big","kind":"echo","stdin":"` + strings.Repeat("x", 8<<10) + `"}`, "over the 4096-byte limit"},
		{"dir escapes", `{"v":1,"id":"d1","kind":"exec","command":"/bin/true","dir":"../agent-2"}`, `dir: must not contain ".."`},
		{"file escapes", `{"v":1,"id":"f1","kind":"exec","command":"/bin/true","files":{"a/../../x":"y"}}`, `files[a/../../x]: must not contain ".."`},
		{"id escapes", `{"v":1,"id":"../../etc","kind":"echo"}`, "id: must match"},
		{"future version", `{"v":9,"id":"v9","kind":"echo"}`, "v: unsupported version 9"},
	}
	for _, c := range cases {
		seq := e.publishRaw(subj, []byte(c.body))
		r := e.waitResult(ch, seq, 10*time.Second)
		if r.Status != protocol.StatusRejected || !strings.Contains(r.Error, c.want) || r.Agent != "agent-1" {
			t.Errorf("%s: got status %q error %q, want rejected naming %q", c.name, r.Status, r.Error, c.want)
		}
	}
	// Still running, and still running the good ones.
	res := e.run(operator.Target{Agent: "agent-1"}, echo("after", "still here"), 10*time.Second)
	if !res[0].OK() || res[0].Stdout != "still here" {
		t.Fatalf("agent stopped working after bad tasks: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(e.shared, "agents", "agent-2")); err == nil {
		t.Fatal("a rejected task created agent-2's directory")
	}
}

func TestExecFeatures(t *testing.T) {
	e := newEnv(t, flockWith(1, nil))
	t.Setenv("ALLOWED_VAR", "visible")
	t.Setenv("SECRET_VAR", "hidden")
	e.start("agent-1", func(c *worker.Config) { c.EnvAllow = []string{"ALLOWED_*"}; c.MaxOutputBytes = 64 << 10 })
	to := operator.Target{Agent: "agent-1"}

	t.Run("stdin", func(t *testing.T) {
		task := tool("cat", "cat")
		task.Stdin = "piped in"
		r := e.run(to, task, 10*time.Second)[0]
		if r.Stdout != "piped in" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("environment allow-list", func(t *testing.T) {
		task := tool("env", "env")
		task.Env = map[string]string{"MODE": "fast"}
		out := e.run(to, task, 10*time.Second)[0].Stdout
		for _, want := range []string{"ALLOWED_VAR=visible", "MODE=fast", "FLOCK_TASK_ID=env", "FLOCK_AGENT_ID=agent-1",
			"FLOCK_NATS_URL=" + e.f.URL, "FLOCK_NKEY_FILE=" + e.f.SeedFile(t, "agent-1")} {
			mustContain(t, "task env", out, want)
		}
		if strings.Contains(out, "SECRET_VAR") || strings.Contains(out, "\nNATS_") || strings.HasPrefix(out, "NATS_") {
			t.Fatalf("task saw variables outside the allow-list:\n%s", out)
		}
	})
	t.Run("trace context", func(t *testing.T) {
		// The operator's trace reaches the process as a span of the
		// agent's own; a TRACEPARENT in the task's env does not stand in.
		task := tool("traced", "env")
		forged := "00-11111111111111111111111111111111-2222222222222222-01"
		task.Env = map[string]string{protocol.EnvTraceparent: forged}
		r := e.run(to, task, 10*time.Second)[0]
		var got string
		for _, l := range strings.Split(r.Stdout, "\n") {
			if v, ok := strings.CutPrefix(l, protocol.EnvTraceparent+"="); ok {
				got = v
			}
		}
		tp, err := protocol.ParseTraceparent(got)
		if err != nil || r.Trace == "" || tp.Trace() != r.Trace || got == forged {
			t.Fatalf("TRACEPARENT %q (%v), result's trace %q", got, err, r.Trace)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		task := tool("slow", "sleep", "10s")
		task.Timeout = protocol.Duration(300 * time.Millisecond)
		start := time.Now()
		r := e.run(to, task, 10*time.Second)[0]
		if r.Status != protocol.StatusTimeout || time.Since(start) > 5*time.Second {
			t.Fatalf("timeout: %+v after %s", r, time.Since(start))
		}
	})
	t.Run("exit code", func(t *testing.T) {
		r := e.run(to, tool("three", "exit", "3"), 10*time.Second)[0]
		if r.Status != protocol.StatusFailed || r.ExitCode == nil || *r.ExitCode != 3 {
			t.Fatalf("exit 3: %+v", r)
		}
	})
	t.Run("output cap", func(t *testing.T) {
		task := tool("chatty", "output", "200000")
		task.MaxOutputBytes = 1000
		r := e.run(to, task, 10*time.Second)[0]
		st, err := os.Stat(filepath.Join(r.Dir, "stdout"))
		if err != nil || st.Size() != 1000 || !r.Truncated || r.StdoutBytes != 200000 || len(r.Stdout) != 1000 || !r.OK() {
			t.Fatalf("output cap: file %v %v, result truncated=%v bytes=%d inline=%d", st.Size(), err, r.Truncated, r.StdoutBytes, len(r.Stdout))
		}
	})
	t.Run("files and dir stay in the task directory", func(t *testing.T) {
		task := tool("files", "read", "in.txt")
		task.Files = map[string]string{"work/in.txt": "from a file"}
		task.Dir = "work"
		r := e.run(to, task, 10*time.Second)[0]
		if r.Stdout != "from a file" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("missing command", func(t *testing.T) {
		task := protocol.Task{V: 1, ID: "nope", Kind: protocol.KindExec, Command: "/no/such/program"}
		r := e.run(to, task, 10*time.Second)[0]
		if r.Status != protocol.StatusError || !strings.Contains(r.Error, "/no/such/program") {
			t.Fatalf("%+v", r)
		}
	})
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, func(c *flock.Config) { c.Limits.Concurrency = ptr(2) }))
	e.start("agent-1")
	ch := e.subscribeResults()
	var seqs []uint64
	for i := range 3 { // own tasks and pool tasks share the slots
		b, _ := json.Marshal(tool(fmt.Sprintf("own%d", i), "sleep", "300ms"))
		seqs = append(seqs, e.publishRaw(protocol.TaskSubject("agent-1"), b))
		b, _ = json.Marshal(tool(fmt.Sprintf("pool%d", i), "sleep", "300ms"))
		seqs = append(seqs, e.publishRaw(protocol.SubjectTasksPool, b))
	}
	var rs []protocol.Result
	for _, r := range e.waitResults(ch, seqs, 20*time.Second) {
		rs = append(rs, r)
	}
	peak := 0
	for _, r := range rs {
		at := r.Started.Add(time.Duration(r.DurationMS*float64(time.Millisecond)) / 2)
		n := 0
		for _, o := range rs {
			if !o.Started.After(at) && o.Finished.After(at) {
				n++
			}
		}
		peak = max(peak, n)
	}
	if peak != 2 {
		t.Fatalf("peak concurrency %d, want exactly CONCURRENCY=2", peak)
	}
}

func TestGracefulShutdownFinishesInFlightTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	hb := e.subscribeHeartbeats("agent-1")
	proc := e.spawn("agent-1")
	ch := e.subscribeResults()
	seq := e.publishSleeping("inflight", "700ms", "started")
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := e.waitResult(ch, seq, 10*time.Second)
	if !r.OK() {
		t.Fatalf("in-flight task not finished during drain: %+v", r)
	}
	if err := proc.Wait(); err != nil {
		t.Fatalf("agent exit after SIGTERM: %v (want status 0)", err)
	}
	e.waitEvent("agent-1", protocol.EventStopped, 5*time.Second)
	last := protocol.Heartbeat{}
	for len(hb) > 0 {
		last = <-hb
	}
	if last.State != protocol.StateStopped || last.Completed != 1 {
		t.Fatalf("last heartbeat %+v, want state stopped with 1 completed", last)
	}
}

func TestShutdownHandsBackTaskLongerThanGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	a := e.start("agent-1", func(c *worker.Config) { c.Grace = 300 * time.Millisecond })
	ch := e.subscribeResults()
	seq := e.publishSleeping("long", "30s", "long-started")
	start := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("drain took %s with a 300ms grace period", d)
	}
	select {
	case m := <-ch:
		t.Fatalf("a handed-back task must not be reported: %s", m.Data)
	case <-time.After(200 * time.Millisecond):
	}
	// The task was handed back (nak), not lost: it is available again at
	// once, not only after the 30 s ack wait.
	js1 := bustest.JetStream(t, e.f.Connect(t, "agent-1"))
	cons, err := js1.Consumer(t.Context(), protocol.StreamTasks, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(3 * time.Second))
	if err != nil {
		t.Fatalf("handed-back task not available again: %v", err)
	}
	meta, _ := msg.Metadata()
	if meta.Sequence.Stream != seq || meta.NumDelivered != 2 {
		t.Fatalf("redelivery: seq %d delivered %d, want seq %d delivered 2", meta.Sequence.Stream, meta.NumDelivered, seq)
	}
	_ = msg.Ack()
}

func TestHeartbeatAndHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	hb := e.subscribeHeartbeats("agent-1")
	cfg := e.config("agent-1")
	if _, err := worker.CheckHealth(cfg.StatusFile, time.Minute); err == nil {
		t.Fatal("healthy before the agent started")
	}
	a := e.start("agent-1", func(c *worker.Config) { c.Heartbeat = 200 * time.Millisecond })
	seen := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !seen[protocol.StateReady] || len(seen) < 2 {
		select {
		case h := <-hb:
			if h.Agent != "agent-1" || h.V != 1 || h.Concurrency != 2 || h.IntervalMS != 200 {
				t.Fatalf("heartbeat %+v", h)
			}
			seen[h.State+fmt.Sprint(h.Seq)] = true
			seen[h.State] = true
		case <-deadline:
			t.Fatalf("heartbeats seen: %v", seen)
		}
	}
	h, err := worker.CheckHealth(cfg.StatusFile, time.Minute)
	if err != nil {
		t.Fatalf("running agent unhealthy: %v", err)
	}
	if h.Bus != "connected" || h.BusConfirmed.IsZero() || h.State != protocol.StateReady {
		t.Fatalf("running agent's health %+v, want ready with its bus connected and confirmed", h)
	}
	_ = a.stop(t)
	if _, err := worker.CheckHealth(cfg.StatusFile, time.Minute); err == nil {
		t.Fatal("healthy after the agent stopped")
	}
}

// An agent whose bus is away stays healthy (an orchestrator would replace
// an unhealthy task: ECS replaces every agent whose health check fails), and
// says where the bus went: the status file reports it unreachable, and when
// the bus is back the agent reports the loss (disconnected, with its cause),
// the return (reconnected, with how long it took) and counts it in its
// heartbeats.
func TestHealthyWhileTheBusIsAway(t *testing.T) {
	testkit.SkipInShort(t, "slow: stops and restarts the bus; make check runs it")
	t.Parallel()
	f := bustest.Start(t, flockWith(1, nil))
	// The operator's connection outlives the outage and comes back before
	// the agent's (20 ms between tries, the agent's 500 ms and more), so it
	// hears what the agent says once the bus is back.
	e := envOn(t, f, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectJitter(0, 0))
	hb := e.subscribeHeartbeats("agent-1")
	cfg := e.config("agent-1")
	const maxAge = 1500 * time.Millisecond
	e.start("agent-1", func(c *worker.Config) { c.Heartbeat = 200 * time.Millisecond })
	f.Bus.Shutdown()
	// Several status periods without a bus: an agent whose health meant
	// "my bus answered recently" would be unhealthy by now.
	time.Sleep(3 * maxAge)
	h, err := worker.CheckHealth(cfg.StatusFile, maxAge)
	if err != nil {
		t.Fatalf("agent unhealthy while its bus is away: %v", err)
	}
	if h.Bus != "unreachable" || h.State != protocol.StateReady {
		t.Fatalf("health while the bus is away: %+v, want ready with the bus unreachable", h)
	}
	if since := time.Since(h.BusConfirmed); since < 2*maxAge {
		t.Fatalf("bus confirmed %s ago while it was down", since)
	}

	f.RestartBus(t)
	back := e.waitEvent("agent-1", protocol.EventReconnected, 15*time.Second)
	if !strings.Contains(back.Detail, "bus unreachable for ") {
		t.Fatalf("reconnected event %+v: want how long the bus was away, and why", back)
	}
	// Heartbeats sent during the outage may arrive first (the client
	// buffered them); the next ones count the reconnect.
	counted := time.After(5 * time.Second)
	for {
		select {
		case beat := <-hb:
			if beat.Reconnects >= 1 {
				if h, err := worker.CheckHealth(cfg.StatusFile, maxAge); err != nil || h.Bus != "connected" {
					t.Fatalf("health after the bus came back: %+v, %v", h, err)
				}
				return
			}
		case <-counted:
			t.Fatal("no heartbeat counting the reconnect within 5 s")
		}
	}
}

// The runtime says it is alive before the bus ever answers: a task started
// while its bus is still starting is not replaced for it.
func TestHealthyBeforeTheBusAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	cfg := e.config("agent-1")
	cfg.URL = "nats://127.0.0.1:1" // nothing listens there
	cfg.Heartbeat = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, cfg, logger()) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := worker.CheckHealth(cfg.StatusFile, time.Second)
		if err == nil {
			if h.Bus != "unreachable" || h.State != protocol.StateStarting || !h.BusConfirmed.IsZero() {
				t.Fatalf("health before the bus answered: %+v", h)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status before the bus answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInboxAndBroadcastReachTheAgentsDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(2, nil))
	e.start("agent-1")
	e.start("agent-2")
	ctx := t.Context()
	r, err := e.cl.Send(ctx, "agent-1", protocol.Message{ID: "m-1", Body: "please review"}, 5*time.Second)
	if err != nil || r.Status != protocol.ReceiptDelivered || r.Seq == 0 {
		t.Fatalf("receipt %+v, %v: want delivered", r, err)
	}
	var st struct {
		Kind    string
		Message protocol.Message
	}
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(e.shared, "agents", "agent-1", r.File))), &st); err != nil {
		t.Fatal(err)
	}
	if st.Kind != "inbox" || st.Message.Body != "please review" || st.Message.From != protocol.OperatorUser {
		t.Fatalf("stored inbox message %+v", st)
	}
	if es, _ := filepath.Glob(filepath.Join(e.shared, "agents", "agent-2", "inbox", "*.json")); len(es) != 0 {
		t.Fatalf("agent-2 got agent-1's message: %v", es)
	}

	// Agent to agent: agent-2 may write to agent-1's inbox, as itself; a
	// claim in the body is not believed. Agent-1's receipt names the file.
	// (Published by hand: mailbox.Send never makes that claim.)
	nc2 := e.f.Connect(t, "agent-2")
	receipts2, err := nc2.SubscribeSync(nc2.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	claim := nats.NewMsg(protocol.InboxSubject("agent-1", "agent-2"))
	claim.Data, _ = json.Marshal(protocol.Message{V: 1, ID: "from-2", From: protocol.OperatorUser, Body: "hi"})
	claim.Header.Set(protocol.HeaderReceipt, receipts2.Subject)
	if err := nc2.PublishMsg(claim); err != nil {
		t.Fatal(err)
	}
	reply, err := receipts2.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rc protocol.Receipt
	if err := json.Unmarshal(reply.Data, &rc); err != nil || rc.ID != "from-2" || rc.To != "agent-1" || rc.From != "agent-2" || rc.File == "" || rc.Status != protocol.ReceiptDelivered {
		t.Fatalf("receipt %s (%v)", reply.Data, err)
	}
	var got worker.Stored
	if err := json.Unmarshal([]byte(testkit.ReadFile(t, filepath.Join(e.shared, "agents", "agent-1", rc.File))), &got); err != nil {
		t.Fatal(err)
	}
	if got.From != "agent-2" || got.Message.From != "agent-2" || !strings.Contains(got.Problem, `claimed to be from "operator"`) {
		t.Fatalf("stored %+v: want the sender the subject names, and the false claim noted", got)
	}
	// The same message again (a retry after a lost answer) is stored once,
	// and the retry is told it is a duplicate of the first, never "queued".
	first, err := mailbox.Send(ctx, nc2, "agent-2", "agent-1", protocol.Message{ID: "retried", Body: "hi"}, 5*time.Second)
	if err != nil || first.Status != protocol.ReceiptDelivered {
		t.Fatalf("a message: %+v %v", first, err)
	}
	again, err := mailbox.Send(ctx, nc2, "agent-2", "agent-1", protocol.Message{ID: "retried", Body: "hi"}, time.Second)
	if !errors.Is(err, mailbox.ErrDuplicate) || again.Seq != first.Seq || again.Status != protocol.ReceiptDuplicate {
		t.Fatalf("a retried message: %+v %v; want the first one's mailbox seq %d (not stored again)", again, err, first.Seq)
	}
	if files, _ := filepath.Glob(filepath.Join(e.shared, "agents", "agent-1", "inbox", "*-retried.json")); len(files) != 1 {
		t.Fatalf("a retried message stored in %v: want one file", files)
	}

	// Stored without amplification: a body of "<" (which encoding/json
	// escapes to six bytes each by default) takes about its own size.
	lt := strings.Repeat("<", 20000)
	ltr, err := e.cl.Send(ctx, "agent-1", protocol.Message{ID: "lt", Body: lt}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(e.shared, "agents", "agent-1", ltr.File)); err != nil || fi.Size() > int64(len(lt))+1024 {
		t.Fatalf("a %d-byte body stored in %v bytes (%v)", len(lt), fi.Size(), err)
	}
	// Over the mailbox's limit: refused at once, by name.
	if _, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: strings.Repeat("x", protocol.MailMessageBytes)}, time.Second); !errors.Is(err, mailbox.ErrRefused) {
		t.Fatalf("a message over the mailbox's limit: %v", err)
	}
	if _, err := e.cl.Send(ctx, "agent-9", protocol.Message{Body: "anyone?"}, time.Second); !errors.Is(err, mailbox.ErrNoMailbox) {
		t.Fatalf("a message to an agent the flock does not have: %v", err)
	}

	receipts, missing, err := e.cl.Broadcast(ctx, protocol.Message{ID: "b-1", Body: "all hands"})
	if err != nil || len(missing) != 0 || len(receipts) != 2 {
		t.Fatalf("broadcast: receipts %+v, missing %v, %v", receipts, missing, err)
	}
	for _, r := range receipts {
		if r.Error != "" || !strings.Contains(testkit.ReadFile(t, filepath.Join(e.shared, "agents", r.To, r.File)), "all hands") {
			t.Fatalf("%s broadcast receipt %+v", r.To, r)
		}
		if ev := e.waitEvent(r.To, protocol.EventBroadcast, 5*time.Second); ev.Ref != "b-1" || ev.Detail != r.File {
			t.Fatalf("%s broadcast event %+v, receipt %+v", r.To, ev, r)
		}
	}

	// A receipt goes only to the sender's own reply inbox: agent-2 naming
	// the operator's has agent-1 send nothing there (the message is still
	// stored); a message published without one is stored too (the mailbox
	// keeps it; its sender just hears nothing).
	opInbox := protocol.InboxPrefix(protocol.OperatorInboxToken) + ".stolen"
	spy := e.f.Connect(t, protocol.OperatorUser)
	stolen, err := spy.SubscribeSync(opInbox)
	if err != nil {
		t.Fatal(err)
	}
	_ = spy.Flush()
	before, _ := os.ReadDir(filepath.Join(e.shared, "agents", "agent-1", "inbox"))
	m := nats.NewMsg(protocol.InboxSubject("agent-1", "agent-2"))
	m.Data = []byte(`{"v":1,"id":"misdirected","body":"answer the operator"}`)
	m.Header.Set(protocol.HeaderReceipt, opInbox)
	if err := nc2.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	if err := nc2.Publish(protocol.InboxSubject("agent-1", "agent-2"), []byte(`{"v":1,"id":"unasked","body":"fire and forget"}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, _ := os.ReadDir(filepath.Join(e.shared, "agents", "agent-1", "inbox"))
		if len(after) == len(before)+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d new inbox files, want the misdirected and the unasked message", len(after)-len(before))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := stolen.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatalf("agent-1 answered into the operator's reply inbox on agent-2's word: %s", got.Data)
	}
}

func TestLongTaskIsNotRedeliveredWhileItRuns(t *testing.T) {
	testkit.SkipInShort(t, "slow: runs a task past its ack wait; make check runs it")
	t.Parallel()
	// Ack wait 1 s, task 2.5 s: without progress acks the bus would hand
	// the task out again twice while it still runs.
	e := newEnv(t, flockWith(2, func(c *flock.Config) { c.Bus.AckWait = ptr("1s") }))
	e.start("agent-1")
	e.start("agent-2")
	ch := e.subscribeResults()
	b, _ := json.Marshal(tool("long", "sleep", "2500ms"))
	seq := e.publishRaw(protocol.SubjectTasksPool, b)
	r := e.waitResult(ch, seq, 15*time.Second)
	if !r.OK() || r.Attempt != 1 {
		t.Fatalf("long task: %+v (want ok on attempt 1)", r)
	}
	select {
	case m := <-ch:
		t.Fatalf("a second run of the long task: %s", m.Data)
	case <-time.After(1500 * time.Millisecond):
	}
}

// A hostile agent, which may not read the pool's consumer any more, guesses
// pool task sequences and publishes results for them on its own subject
// while the agent that was given the task runs it. Without the task's nonce
// the operator ignores them and reports them.
func TestForgedPoolResultIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(3, nil))
	e.start("agent-1")
	forger := e.f.Connect(t, "agent-3") // agent-3's own key; it runs no worker
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fctx, stopForging := context.WithCancel(ctx)
	defer stopForging()
	go func() {
		for fctx.Err() == nil {
			for seq := uint64(1); seq <= 20; seq++ {
				b, _ := json.Marshal(protocol.Result{V: 1, Agent: "agent-3", Status: protocol.StatusOK, Subject: protocol.SubjectTasksPool, Seq: seq, Nonce: "guessed", Stdout: "forged"})
				_ = forger.Publish(protocol.ResultSubject("agent-3"), b)
			}
			_ = forger.Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var forged []protocol.Result
	res, err := e.cl.RunChecked(ctx, operator.Target{Pool: true}, tool("pooled", "sleep", "1500ms"), nil, func(r protocol.Result) { forged = append(forged, r) })
	stopForging()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Agent != "agent-1" || res[0].Subject != protocol.SubjectTasksPool || !res[0].OK() {
		t.Fatalf("results %+v: want only agent-1's", res)
	}
	if len(forged) == 0 || forged[0].Agent != "agent-3" || forged[0].Stdout != "forged" || forged[0].Seq != res[0].Seq {
		t.Fatalf("forged %+v: want agent-3's reported", forged)
	}
}

// A peer flooding an agent's inbox fills only its own share of the mailbox
// (protocol.MailPerSender) and is then refused by the bus, by name; the
// agent stores its messages at the sender's rate (INBOX_RATE), and the
// operator (another sender) is delivered to at once meanwhile.
func TestInboxFloodFromOneSenderIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(2, nil))
	e.start("agent-1", func(c *worker.Config) { c.InboxRate = 2 }) // burst 10
	nc2 := e.f.Connect(t, "agent-2")
	ctx := t.Context()
	start := time.Now()
	queued, refused := 0, 0
	for i := range protocol.MailPerSender + 30 {
		_, err := mailbox.Send(ctx, nc2, "agent-2", "agent-1", protocol.Message{ID: fmt.Sprintf("flood-%d", i), Body: "spam"}, 0)
		switch {
		case err == nil:
			queued++
		case errors.Is(err, mailbox.ErrRefused) && strings.Contains(err.Error(), fmt.Sprintf("agent-1 already has %d messages from agent-2 waiting", protocol.MailPerSender)):
			refused++
		default:
			t.Fatalf("message %d: %v", i, err)
		}
	}
	// What agent-1 stored meanwhile left the mailbox: its burst, and what
	// its rate refilled while the flood went on.
	if refused == 0 || queued > protocol.MailPerSender+10+int(2*time.Since(start).Seconds())+1 {
		t.Fatalf("queued %d, refused %d: want agent-2 refused past its share of %d", queued, refused, protocol.MailPerSender)
	}
	r, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: "still heard"}, 5*time.Second)
	if err != nil || r.Status != protocol.ReceiptDelivered {
		t.Fatalf("the operator while agent-2 floods: %+v %v; want delivered at once", r, err)
	}
	took := time.Since(start)
	files, _ := os.ReadDir(filepath.Join(e.shared, "agents", "agent-1", "inbox"))
	if limit := 10 + int(2*took.Seconds()) + 1 + 1; len(files) > limit {
		t.Fatalf("%d inbox files after %s: agent-2's messages stored faster than its rate (want at most %d)", len(files), took, limit)
	}
}

// A key replaced on disk (flock:busSecret changed: new seed files by rename,
// the bus reloaded with the new public keys) reaches a running agent: it
// drains the old session and connects again with the new key, in the same
// process, and takes tasks again; the old key no longer gets in.
func TestKeyRotationReachesRunningAgent(t *testing.T) {
	testkit.SkipInShort(t, "slow: rotates a key and waits for the agent to reconnect with it; make check runs it")
	e := newEnv(t, bustest.Agents(2))
	a1 := e.start("agent-1", func(c *worker.Config) { c.KeyCheck = 100 * time.Millisecond })
	if res := e.run(operator.Target{Agent: "agent-1"}, echo("before", "old key"), 10*time.Second); len(res) != 1 || !res[0].OK() {
		t.Fatalf("before rotation: %+v", res)
	}
	old := e.f.SeedFile(t, "agent-1") // rewritten below; keep the old seed's copy
	oldSeed, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	oldCopy := filepath.Join(t.TempDir(), "old.nk")
	if err := os.WriteFile(oldCopy, oldSeed, 0o600); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	e.f.RotateAgentKeys(t, []byte("a-new-bus-secret-for-the-rotation-test"))
	e.waitEvent("agent-1", protocol.EventReady, 20*time.Second)
	t.Logf("agent-1 ready with its new key %s after the rotation", time.Since(start).Round(time.Millisecond))
	if res := e.run(operator.Target{Agent: "agent-1"}, echo("after", "new key"), 10*time.Second); len(res) != 1 || !res[0].OK() || res[0].Agent != "agent-1" {
		t.Fatalf("after rotation: %+v", res)
	}
	select {
	case err := <-a1.done:
		t.Fatalf("the agent's Run returned (%v): the rotation restarted the process instead of reconnecting", err)
	default:
	}
	// The bus took the old key away: it is of no use to anyone who kept it.
	nk, err := nats.NkeyOptionFromSeed(oldCopy)
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(e.f.URL, nk); err == nil {
		nc.Close()
		t.Fatal("the old key still connects after the rotation")
	}
}
