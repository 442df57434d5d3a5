package board_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// remove: the operator deletes a finished plan's tasks (done, failed,
// cancelled), never one with a task still open, and never as an agent; the
// plan's ID is free again after.
func TestRemoveAFinishedPlan(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.apply(t, plan("p", prompt("a"), prompt("b", "a"), prompt("c")))
	e.apply(t, plan("other", prompt("x")))
	claim(t, a1, "p", "a")
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "a", protocol.BoardResult{Summary: "a"}))

	_, err := e.op.Remove(ctxT(t), "p")
	if be := refused(t, err, protocol.BoardErrNotReady); !strings.Contains(be.Msg, "plan p has 2 of 3 tasks not finished") {
		t.Fatalf("removing an open plan: %v", be)
	}
	_, err = a1.Remove(ctxT(t), "p")
	refused(t, err, protocol.BoardErrForbidden)
	_, err = e.op.Remove(ctxT(t), "nope")
	refused(t, err, protocol.BoardErrNotFound)

	claim(t, a1, "p", "b")
	must[*protocol.BoardTask](t)(a1.Fail(ctxT(t), "p", "b", "broken", nil))
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "p", "c", ""))
	changes := must[[]protocol.BoardChange](t)(e.op.Remove(ctxT(t), "p"))
	if len(changes) != 3 {
		t.Fatalf("removed %+v, want the plan's 3 tasks", changes)
	}
	for _, c := range changes {
		if c.Change != protocol.BoardDeleted {
			t.Fatalf("change %+v", c)
		}
	}
	if ts := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p")); len(ts) != 0 {
		t.Fatalf("after remove, plan p lists %+v", ts)
	}
	_, err = e.op.Show(ctxT(t), "p", "a")
	refused(t, err, protocol.BoardErrNotFound)
	if ts := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "other")); len(ts) != 1 {
		t.Fatalf("another plan's tasks after removing p: %+v", ts)
	}
	// The ID is free: the same plan again makes new tasks.
	if ch := e.apply(t, plan("p", prompt("a"))); ch["a"].Change != protocol.BoardCreated {
		t.Fatalf("the plan applied again after its removal: %+v", ch)
	}
}

// The sweeper removes a finished plan once its last change is older than
// flock:board.keepFinished, and keeps an open plan, however old, and a
// finished one still within the keep.
func TestFinishedPlansArePruned(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	e.setBoard(t, func(c *protocol.BoardConfig) { c.KeepFinished = protocol.Duration(time.Hour) })
	e.apply(t, plan("old", prompt("a")))
	e.apply(t, plan("open", prompt("a"), prompt("b")))
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "old", "a", ""))
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "open", "a", ""))
	e.clk.Advance(30 * time.Minute)
	e.apply(t, plan("recent", prompt("a")))
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "recent", "a", ""))
	// The sweeper looks once a minute (of the board's clock): 31 minutes
	// on, "old" finished 61 minutes ago, "recent" 31.
	e.clk.Advance(31 * time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for len(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "old"))) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a plan finished an hour and a minute ago, with a keep of an hour, is still on the board")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // more sweeps
	if ts := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "recent")); len(ts) != 1 {
		t.Fatalf("a plan finished 31 minutes ago was pruned: %+v", ts)
	}
	e.clk.Advance(24 * time.Hour)
	time.Sleep(200 * time.Millisecond)
	if ts := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "open")); len(ts) != 2 {
		t.Fatalf("an open plan (b still ready) was pruned: %+v", ts)
	}
}
