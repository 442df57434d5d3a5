package cli_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/boardtest"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
)

func rev(t protocol.BoardTask, r uint64, holder string) protocol.BoardTask {
	t.Revision, t.Holder, t.Updated = r, holder, time.Now()
	return t
}

// listThen answers list with tasks and then, after the answer, publishes
// the transitions (the command subscribed before it listed).
func listThen(f *boardtest.Fake, tasks []protocol.BoardTask, before []protocol.BoardTask, after ...protocol.BoardTask) {
	f.Handle(func(r boardtest.Request) protocol.BoardReply {
		if r.Op != protocol.BoardOpList {
			return boardtest.Refuse(protocol.BoardErrInvalid, "unexpected "+r.Op)
		}
		// A transition published while the list is on its way is not lost.
		for _, t := range before {
			f.Publish(t)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			for _, t := range after {
				f.Publish(t)
			}
		}()
		return protocol.BoardReply{Tasks: tasks}
	})
}

func TestPlanWaitExitsZeroWhenEveryTaskIsDone(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	a := rev(task("p", "a", protocol.BoardClaimed), 5, "agent-1")
	b := rev(task("p", "b", protocol.BoardBlocked, "a"), 3, "")
	aDone := rev(task("p", "a", protocol.BoardDone), 6, "agent-1")
	stale := rev(task("p", "a", protocol.BoardReady), 4, "") // older than the list: ignored
	listThen(e.fake, []protocol.BoardTask{a, b}, []protocol.BoardTask{aDone}, stale,
		rev(task("p", "b", protocol.BoardReady, "a"), 7, ""),
		rev(task("p", "b", protocol.BoardClaimed, "a"), 8, "agent-2"),
		rev(task("p", "b", protocol.BoardDone, "a"), 9, "agent-2"))
	code, out, errOut := runIn(e.operator, "plan", "wait", "p", "--timeout", "10s")
	if code != cli.ExitOK {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpList))
	if req.Plan != "p" {
		t.Fatalf("listed %+v", req)
	}
	for _, w := range []string{
		"p: 0/2 done, 0 ready, 1 claimed, 1 blocked, 0 failed; critical path left: 2 tasks",
		"claimed -> p/a done by agent-1",
		"p: 1/2 done, 0 ready, 0 claimed, 1 blocked, 0 failed; critical path left: 1 task",
		"blocked -> p/b ready", "ready -> p/b claimed by agent-2", "claimed -> p/b done",
		"plan p: all 2 tasks done",
	} {
		if !strings.Contains(out, w) {
			t.Fatalf("output %q lacks %q", out, w)
		}
	}
	if strings.Contains(out, "-> p/a ready") {
		t.Fatalf("a stale transition was applied: %q", out)
	}
}

func TestPlanWaitExitsOneWhenNothingLeftCanRun(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	failed := rev(task("p", "a", protocol.BoardFailed), 4, "")
	failed.Reason = "out of attempts"
	listThen(e.fake, []protocol.BoardTask{
		rev(task("p", "c", protocol.BoardDone), 2, "agent-1"),
		rev(task("p", "b", protocol.BoardBlocked, "a"), 3, ""), // waits on a: cannot run
		rev(task("p", "d", protocol.BoardClaimed), 3, "agent-2"),
	}, nil, failed, rev(task("p", "d", protocol.BoardDone), 5, "agent-2"))
	code, out, errOut := runIn(e.operator, "plan", "wait", "p", "--timeout", "10s")
	if code != cli.ExitTaskFailed || !strings.Contains(out, "plan p: nothing left can run (2 of 4 done):\n  p/a failed: out of attempts") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
}

// A transition whose event was lost (core NATS, a node dying) is found by
// reading the board again: plan wait still ends, without its timeout.
// Not parallel: it shortens RelistEvery for its run.
func TestPlanWaitFindsALostLastTransition(t *testing.T) {
	t.Parallel()
	defer func(d time.Duration) { cli.RelistEvery = d }(cli.RelistEvery)
	cli.RelistEvery = 100 * time.Millisecond
	e := startBoard(t)
	var mu sync.Mutex
	lists := 0
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		mu.Lock()
		defer mu.Unlock()
		lists++
		if lists == 1 { // a is running; its done event will never be published
			return protocol.BoardReply{Tasks: []protocol.BoardTask{rev(task("p", "a", protocol.BoardClaimed), 5, "agent-1")}}
		}
		return protocol.BoardReply{Tasks: []protocol.BoardTask{rev(task("p", "a", protocol.BoardDone), 6, "agent-1")}}
	})
	start := time.Now()
	code, out, errOut := runIn(e.operator, "plan", "wait", "p", "--timeout", "10s")
	if code != cli.ExitOK || !strings.Contains(out, "claimed -> p/a done by agent-1") || !strings.Contains(out, "plan p: all 1 task done") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s: the board was not read again", d)
	}
}

func TestPlanWaitTimesOut(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	// c failed, but b waits on a, which is done: b is about to be ready,
	// so the plan is not lost yet.
	listThen(e.fake, []protocol.BoardTask{
		rev(task("p", "a", protocol.BoardDone), 2, ""),
		rev(task("p", "b", protocol.BoardBlocked, "a"), 3, ""),
		rev(task("p", "c", protocol.BoardFailed), 3, ""),
	}, nil)
	start := time.Now()
	code, out, errOut := runIn(e.operator, "plan", "wait", "p", "--timeout", "300ms")
	if code != cli.ExitTimeout || !strings.Contains(errOut, "timed out after 300ms: p: 1/3 done") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s", d)
	}
	// A plan the board does not have: nothing to wait for.
	listThen(e.fake, nil, nil)
	if code, _, errOut := runIn(e.operator, "plan", "wait", "q", "--timeout", "5s"); code != cli.ExitTaskFailed || !strings.Contains(errOut, "plan q has no tasks") {
		t.Fatalf("unknown plan: exit %d, %q", code, errOut)
	}
}

func TestBoardWatchPrintsTransitionsAndProgress(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	listThen(e.fake, []protocol.BoardTask{
		rev(task("p", "a", protocol.BoardReady), 1, ""),
		rev(task("p", "b", protocol.BoardBlocked, "a"), 1, ""),
		rev(task("p", "c", protocol.BoardBlocked, "b"), 1, ""),
		rev(task("p", "x", protocol.BoardReady), 1, ""),
	}, nil, rev(task("p", "a", protocol.BoardClaimed), 2, "agent-1"), rev(task("p", "a", protocol.BoardDone), 3, "agent-1"))
	var out syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"board", "watch", "--plan", "p"}, func(k string) string { return e.operator[k] }, cli.IO{Out: &out, Err: &out})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "claimed -> p/a done") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, w := range []string{
		"p: 0/4 done, 2 ready, 0 claimed, 2 blocked, 0 failed; critical path left: 3 tasks",
		"ready -> p/a claimed by agent-1",
		"p: 1/4 done, 1 ready, 0 claimed, 2 blocked, 0 failed; critical path left: 2 tasks",
	} {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("output %q lacks %q", out.String(), w)
		}
	}
	if req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpList)); req.Plan != "p" {
		t.Fatalf("listed %+v", req)
	}
}

// When a claim's holder goes silent, plan wait says what the plan waits
// on and why: whose claim, how long it has been silent, the lease left,
// and the tasks that need it; a renewal is not printed as a change.
func TestPlanWaitSaysWhatWaitsOnWhom(t *testing.T) {
	t.Parallel()
	defer func(d time.Duration) { cli.RelistEvery = d }(cli.RelistEvery)
	cli.RelistEvery = 100 * time.Millisecond
	e := startBoard(t)
	now := time.Now()
	a := rev(task("p", "a", protocol.BoardClaimed), 5, "agent-2")
	a.ClaimedAt, a.RenewedAt, a.LeaseUntil = now.Add(-40*time.Second), now.Add(-20*time.Second), now.Add(10*time.Second)
	a.Attempts = 1
	renewed := a
	renewed.Revision, renewed.LeaseUntil = 6, now.Add(11*time.Second)
	b := rev(task("p", "b", protocol.BoardBlocked, "a"), 3, "")
	c := rev(task("p", "c", protocol.BoardReady), 4, "")
	c.Assignee = "agent-3"
	var mu sync.Mutex
	lists := 0
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		mu.Lock()
		defer mu.Unlock()
		if lists++; lists == 1 {
			return protocol.BoardReply{Tasks: []protocol.BoardTask{a, b, c}}
		}
		return protocol.BoardReply{Tasks: []protocol.BoardTask{renewed, b, c}}
	})
	code, out, errOut := runIn(e.operator, "plan", "wait", "p", "--timeout", "400ms")
	if code != cli.ExitTimeout {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	for _, w := range []string{
		"p waits on:\n",
		"  p/a: claimed by agent-2, last heard 20s ago, lease 11s left, its timeout in 9m20s; b waits on it\n",
		"  p/c: ready: no agent has claimed it (only agent-3 may)\n",
	} {
		if !strings.Contains(out, w) {
			t.Fatalf("output %q lacks %q", out, w)
		}
	}
	if strings.Contains(out, "claimed -> p/a claimed") {
		t.Fatalf("a renewal printed as a change: %q", out)
	}
}
