package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// boardLease is flock:board.lease in the e2e flock: short, so that a dead
// holder's claim ends within the test's patience.
const boardLease = 10 * time.Second

// boardMoves records every transition of a plan's tasks, as the board
// publishes them.
type boardMoves struct {
	mu    sync.Mutex
	moves []protocol.BoardTask
}

func watchBoard(t *testing.T, plan string) *boardMoves {
	t.Helper()
	nc, _ := jsClient(t)
	bm := &boardMoves{}
	sub, err := nc.Subscribe(protocol.BoardEventSubject(plan, "*"), func(m *nats.Msg) {
		var task protocol.BoardTask
		if json.Unmarshal(m.Data, &task) == nil {
			bm.mu.Lock()
			bm.moves = append(bm.moves, task)
			bm.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return bm
}

// first is the first transition of task id that keeps keep.
func (bm *boardMoves) first(id string, keep func(protocol.BoardTask) bool) (protocol.BoardTask, bool) {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	for _, m := range bm.moves {
		if m.ID == id && keep(m) {
			return m, true
		}
	}
	return protocol.BoardTask{}, false
}

// waitClaimed waits until task id is claimed and says by whom.
func waitClaimed(t *testing.T, cl *board.Client, plan, id string) protocol.BoardTask {
	t.Helper()
	var got protocol.BoardTask
	testkit.WaitEvery(t, 60*time.Second, 100*time.Millisecond, plan+"/"+id+" claimed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		task, err := cl.Show(ctx, plan, id)
		if err == nil && task.Status == protocol.BoardClaimed {
			got = *task
			return true
		}
		return false
	})
	return got
}

// A team survives a dead member: the agent holding a run task is
// SIGKILLed (its container stays down): its claim ends within one lease
// and another agent runs the task to the end. Another holder killed and
// started again at once gives its claim back as its runtime starts (the
// attempt counted), well within a lease.
func TestBoardSurvivesADeadAgent(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "kills agents: replay only")
	cl := boardOperator(t)
	plan := boardPlanID("dead")
	moves := watchBoard(t, plan)
	sleep := []string{"/flock-agent", "tool", "sleep", "6s"}
	applyBoard(t, cl, protocol.BoardPlan{Plan: plan, Tasks: []protocol.BoardTaskSpec{
		{ID: "killed", Run: sleep, Timeout: protocol.Duration(2 * time.Minute)},
		{ID: "restarted", Run: sleep, Needs: []string{"killed"}, Timeout: protocol.Duration(2 * time.Minute)},
	}})
	ctx := context.Background()

	// 1. Killed, and it stays down.
	held := waitClaimed(t, cl, plan, "killed")
	dead := held.Holder
	if err := f.engine.Kill(ctx, container(dead), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Cleanup(func() {
		if err := f.engine.Start(ctx, container(dead)); err != nil {
			t.Errorf("start %s again: %v", dead, err)
		}
		if err := f.waitForHeartbeats(ctx, 90*time.Second); err != nil {
			t.Error(err)
		}
	})
	var back protocol.BoardTask
	testkit.WaitEvery(t, boardLease+30*time.Second, 100*time.Millisecond, "the dead holder's claim to end", func() bool {
		var ok bool
		back, ok = moves.first("killed", func(m protocol.BoardTask) bool { return m.Status == protocol.BoardReady && m.Attempts == 1 })
		return ok
	})
	took := time.Since(killedAt)
	if !strings.HasPrefix(back.Reason, "lease expired: its holder "+dead+" silent for ") {
		t.Fatalf("taken back: %q", back.Reason)
	}
	// Its lease (boardLease) at most, plus a sweep and the margin of a
	// loaded machine; before a claim's lease was apart from its timeout,
	// this was the whole timeout (2 minutes here).
	if took > boardLease+5*time.Second {
		t.Fatalf("the dead holder's claim ended %s after the kill, past its lease of %s", took.Round(time.Millisecond), boardLease)
	}
	t.Logf("%s SIGKILLed holding %s/killed: its claim ended %s later (%s)", dead, plan, took.Round(time.Millisecond), back.Reason)

	// 2. Killed and started again at once: the runtime gives it back.
	second := waitClaimed(t, cl, plan, "restarted")
	if second.Holder == dead {
		t.Fatalf("the dead agent %s claimed again", dead)
	}
	if done, _ := moves.first("killed", func(m protocol.BoardTask) bool { return m.Status == protocol.BoardDone }); done.Holder == dead || done.Attempts != 2 {
		t.Fatalf("killed: done by %s on attempt %d, want another agent on the second", done.Holder, done.Attempts)
	}
	again := second.Holder
	if err := f.engine.Kill(ctx, container(again), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killedAt = time.Now()
	if err := f.engine.Start(ctx, container(again)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEvery(t, boardLease+30*time.Second, 100*time.Millisecond, "the restarted holder's claim given back", func() bool {
		var ok bool
		back, ok = moves.first("restarted", func(m protocol.BoardTask) bool { return m.Status == protocol.BoardReady && m.Attempts == 1 })
		return ok
	})
	took = time.Since(killedAt)
	if !strings.HasPrefix(back.Reason, "abandoned: "+again+" started again while holding it") {
		t.Fatalf("given back: %q (after %s)", back.Reason, took.Round(time.Millisecond))
	}
	t.Logf("%s SIGKILLed holding %s/restarted and started again: its runtime gave the claim back %s after the kill", again, plan, took.Round(time.Millisecond))
	tasks := waitPlanOver(t, cl, plan, 2*time.Minute)
	if r := tasks["restarted"]; r.Status != protocol.BoardDone || r.Attempts != 2 {
		t.Fatalf("restarted: %s on attempt %d (%s), want done on the second", r.Status, r.Attempts, r.Reason)
	}
}
