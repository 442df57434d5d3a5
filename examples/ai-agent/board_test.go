package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/boardtest"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// fakeBoard is the fake board service of tests/boardtest (a plain NATS
// server, agent-1 among its users, no permissions) answering as a board with
// a queue: a claim of kind prompt hands out the next task queued; renew,
// complete, fail and release of a handed-out task are accepted. It keeps
// every request.
type fakeBoard struct {
	*boardtest.Fake
	url, seed string
	nc        *nats.Conn // the board's own, to ring

	mu    sync.Mutex
	queue []protocol.BoardReply
	held  map[string]*protocol.BoardTask
	reqs  []boardtest.Request
}

func startBoard(t *testing.T) *fakeBoard {
	t.Helper()
	f := &fakeBoard{Fake: boardtest.Start(t), held: map[string]*protocol.BoardTask{}}
	f.url, f.seed, f.nc = f.URL, f.Seeds[boardtest.Agent], f.Connect(t, "board")
	f.Handle(f.answer)
	return f
}

// add queues a prompt task (and the tasks it needs) and rings.
func (f *fakeBoard) add(task protocol.BoardTask, needs ...protocol.BoardTask) {
	f.mu.Lock()
	task.V, task.Status = protocol.Version, protocol.BoardReady
	f.queue = append(f.queue, protocol.BoardReply{Task: &task, Context: needs})
	f.mu.Unlock()
	_ = f.nc.Publish(protocol.SubjectBoardReady, nil)
}

func (f *fakeBoard) answer(r boardtest.Request) protocol.BoardReply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	key := protocol.BoardKey(r.Body.Plan, r.Body.Task)
	switch {
	case r.Op == protocol.BoardOpClaim && len(f.queue) > 0 && r.Body.Kind == protocol.BoardKindPrompt:
		rep := f.queue[0]
		f.queue = f.queue[1:]
		rep.Task.Attempts++
		rep.Task.Status, rep.Task.Holder = protocol.BoardClaimed, r.Caller
		f.held[rep.Task.Key()] = rep.Task
		return rep
	case r.Op == protocol.BoardOpClaim:
		return boardtest.Refuse(protocol.BoardErrNothing, "nothing is ready for "+r.Caller)
	case f.held[key] != nil:
		rep := protocol.BoardReply{Task: f.held[key]}
		if r.Op != protocol.BoardOpRenew {
			delete(f.held, key)
		}
		return rep
	}
	return boardtest.Refuse(protocol.BoardErrNotHolder, "not held")
}

func (f *fakeBoard) requests(op string) []boardtest.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []boardtest.Request
	for _, r := range f.reqs {
		if op == "" || r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// wait waits for the request op about plan.task.
func (f *fakeBoard) wait(t *testing.T, op, plan, task string) protocol.BoardRequest {
	t.Helper()
	var got protocol.BoardRequest
	waitFor(t, op+" of "+plan+"."+task, func() bool {
		for _, r := range f.requests(op) {
			if r.Body.Plan == plan && r.Body.Task == task && r.Caller == "agent-1" {
				got = r.Body
				return true
			}
		}
		return false
	})
	return got
}

func promptTask(plan, id, prompt string, timeout time.Duration) protocol.BoardTask {
	return protocol.BoardTask{Plan: plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: id, Prompt: prompt, Timeout: protocol.Duration(timeout)}, CreatedBy: protocol.OperatorUser}
}

// `ai-agent run` claims the board's prompt tasks as its agent, asks the
// model with the prompt and its dependencies' results, writes answer.md and
// completes the task with the answer and the file; a model error fails the
// task, a slow model has the lease renewed, SIGTERM releases the task in
// hand.
func TestRunWorksTheBoardsPromptTasks(t *testing.T) {
	t.Parallel()
	fake, base := startFake(t)
	t.Cleanup(func() { close(fake.release) }) // before the fake stops: its slow answers wait for it
	b := startBoard(t)
	shared := t.TempDir()
	dir := filepath.Join(shared, "agents", "agent-1")
	env := map[string]string{
		"FLOCK_AGENT_ID": "agent-1", "FLOCK_AGENT_DIR": dir, "FLOCK_INBOX_DIR": filepath.Join(dir, "inbox"),
		"FLOCK_SHARED_DIR": shared, "FLOCK_NATS_URL": b.url, "FLOCK_NKEY_FILE": b.seed,
		"ANTHROPIC_BASE_URL": base,
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run"}, func(k string) string { return env[k] }, out, out) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("run exited %d\n%s", code, out.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("run did not stop")
		}
	}
	defer stop()

	// 1. A prompt that builds on a done task: answered and completed.
	need := protocol.BoardTask{Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "facts", Title: "gather the facts"}, Status: protocol.BoardDone,
		Result: &protocol.BoardResult{Summary: "Paris is the capital of France.", Artifacts: []string{"agents/agent-2/board/p.facts/answer.md"}}}
	b.add(promptTask("p", "essay", "Write one line about the capital.", 0), need)
	got := b.wait(t, protocol.BoardOpComplete, "p", "essay")
	file := filepath.Join(dir, "board", "p.essay", "answer.md")
	answer := testkit.ReadFile(t, file)
	if !strings.HasPrefix(answer, "fake answer to: ") || !strings.Contains(answer, "Paris is the capital of France.") ||
		!strings.Contains(answer, "Write one line about the capital.") || !strings.Contains(answer, "gather the facts") {
		t.Fatalf("answer.md: %q", answer)
	}
	if got.Result == nil || got.Result.Summary != answer || len(got.Result.Artifacts) != 1 || got.Result.Artifacts[0] != "agents/agent-1/board/p.essay/answer.md" {
		t.Fatalf("complete: %+v", got.Result)
	}
	if c := b.requests(protocol.BoardOpClaim)[0]; c.Body.Kind != protocol.BoardKindPrompt {
		t.Fatalf("claim %+v", c)
	}

	// 2. A model error (400: the SDK does not retry it) fails the task,
	// with the reason.
	b.add(promptTask("p", "refused", "an invalid prompt", 0))
	if r := b.wait(t, protocol.BoardOpFail, "p", "refused"); !strings.Contains(r.Reason, "400") || !strings.Contains(r.Reason, "the model failed") {
		t.Fatalf("fail: %+v", r)
	}

	// 3. A long answer: the summary is its first 4 KiB, the file has it all.
	long := strings.Repeat("é", 3000)
	b.add(promptTask("p", "long", long, 0))
	got = b.wait(t, protocol.BoardOpComplete, "p", "long")
	answer = testkit.ReadFile(t, filepath.Join(dir, "board", "p.long", "answer.md"))
	if len(got.Result.Summary) > protocol.MaxBoardSummary || len(got.Result.Summary) < protocol.MaxBoardSummary-1 || !strings.HasPrefix(answer, got.Result.Summary) {
		t.Fatalf("summary of a %d-byte answer: %d bytes", len(answer), len(got.Result.Summary))
	}

	// 3b. An agent's subtask (agent-2/sub, in agent-2's namespace): its
	// directory is one name, p.agent-2.sub.
	b.add(promptTask("p", "agent-2/sub", "a subtask of agent-2's", 0))
	got = b.wait(t, protocol.BoardOpComplete, "p", "agent-2/sub")
	if answer = testkit.ReadFile(t, filepath.Join(dir, "board", "p.agent-2.sub", "answer.md")); got.Result == nil ||
		!strings.Contains(answer, "a subtask of agent-2's") || got.Result.Artifacts[0] != "agents/agent-1/board/p.agent-2.sub/answer.md" {
		t.Fatalf("a subtask's answer %q, result %+v", answer, got.Result)
	}

	// 4. A model slower than the task's timeout fails it.
	b.add(promptTask("p", "late", "too slow an answer", 300*time.Millisecond))
	if r := b.wait(t, protocol.BoardOpFail, "p", "late"); r.Reason != "timeout: the model did not answer within 300ms" {
		t.Fatalf("fail: %+v", r)
	}

	// 5. A slow model: a claim of 900 ms is renewed every 300 ms; SIGTERM
	// then releases the task.
	b.add(promptTask("p", "slow", "a slow question", 900*time.Millisecond))
	waitFor(t, "the slow model call", func() bool { return fake.asked("a slow question") == 1 })
	waitFor(t, "a renewal", func() bool {
		for _, r := range b.requests(protocol.BoardOpRenew) {
			if r.Body.Task == "slow" {
				return true
			}
		}
		return false
	})
	stop()
	for _, r := range b.requests(protocol.BoardOpRenew) {
		if r.Body.Plan != "p" || (r.Body.Task != "slow" && r.Body.Task != "late") {
			t.Fatalf("renew %+v", r.Body)
		}
	}
	if r := b.wait(t, protocol.BoardOpRelease, "p", "slow"); r.Reason == "" {
		t.Fatalf("release without a reason: %+v", r)
	}
	for _, r := range b.requests("") {
		if r.Body.Task == "slow" && (r.Op == protocol.BoardOpComplete || r.Op == protocol.BoardOpFail) {
			t.Fatalf("the released task was also %s", r.Op)
		}
		if r.Caller != "agent-1" {
			t.Fatalf("asked as %q", r.Caller)
		}
	}
	logHas(t, out.String(), map[string]any{"msg": "board: answered", "board": "p.essay", "answer_file": file})
}

// AI_AGENT_BOARD=off: the board is never asked; a bad value is refused.
func TestRunWithTheBoardOff(t *testing.T) {
	t.Parallel()
	b := startBoard(t)
	env := map[string]string{"FLOCK_AGENT_ID": "agent-1", "FLOCK_AGENT_DIR": t.TempDir(), "FLOCK_NATS_URL": b.url, "FLOCK_NKEY_FILE": b.seed, "AI_AGENT_BOARD": "off"}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	out := &syncbuf.Buffer{}
	if code := run(ctx, []string{"run"}, func(k string) string { return env[k] }, out, out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if n := len(b.requests("")); n != 0 {
		t.Fatalf("%d board requests with the board off", n)
	}
	if code := run(ctx, []string{"run", "AI_AGENT_BOARD=maybe"}, func(k string) string { return env[k] }, out, out); code != 2 || !strings.Contains(out.String(), "AI_AGENT_BOARD: want on or off") {
		t.Fatalf("AI_AGENT_BOARD=maybe: exit %d: %s", code, out.String())
	}
}

// On a real bus with the real board service and real flock-agents (which
// take run tasks only): a plan of two prompt tasks, the second needing the
// first, is answered by agent-1's `ai-agent run` to done, the second asked
// with the first's answer.
func TestRunWorksAPromptPlanOnTheRealBoard(t *testing.T) {
	t.Parallel()
	fake, base := startFake(t)
	f, shared := startFlock(t, 2)
	dir := filepath.Join(shared, "agents", "agent-1")
	env := map[string]string{
		"FLOCK_AGENT_ID": "agent-1", "FLOCK_AGENT_DIR": dir, "FLOCK_INBOX_DIR": filepath.Join(dir, "inbox"),
		"FLOCK_SHARED_DIR": shared, "FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, "agent-1"),
		"ANTHROPIC_BASE_URL": base,
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run"}, func(k string) string { return env[k] }, out, out) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("run exited %d", code)
		}
	}()

	cl := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	actx, acancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer acancel()
	if _, err := cl.Apply(actx, protocol.BoardPlan{Plan: "ask", Tasks: []protocol.BoardTaskSpec{
		{ID: "facts", Title: "the facts", Prompt: "Name the capital of France."},
		{ID: "essay", Prompt: "Write one line on it.", Needs: []string{"facts"}},
	}}); err != nil {
		t.Fatal(err)
	}
	var essay *protocol.BoardTask
	waitFor(t, "the plan done", func() bool {
		tasks, err := cl.List(actx, "ask")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, task := range tasks {
			if task.Status == protocol.BoardFailed {
				t.Fatalf("%s failed: %s\n%s", task.ID, task.Reason, out.String())
			}
			if task.Status == protocol.BoardDone {
				n++
			}
			if task.ID == "essay" {
				essay = &tasks[i]
			}
		}
		return n == 2
	})
	file := filepath.Join(dir, "board", "ask.essay", "answer.md")
	answer := testkit.ReadFile(t, file)
	if essay.Holder != "agent-1" || essay.Result.Summary != answer || len(essay.Result.Artifacts) != 1 || essay.Result.Artifacts[0] != "agents/agent-1/board/ask.essay/answer.md" {
		t.Fatalf("essay %+v %+v", essay, essay.Result)
	}
	// Asked with the facts' answer before its own prompt.
	if !strings.Contains(answer, "fake answer to: Name the capital of France.") || !strings.Contains(answer, "Write one line on it.") || fake.asked("Write one line on it.") != 1 {
		t.Fatalf("essay's answer %q", answer)
	}
}
