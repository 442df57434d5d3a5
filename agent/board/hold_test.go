package board_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Only the holder renews, completes, fails or releases, and only a claimed
// task; a refused request changes nothing.
func TestOnlyTheHolderWorksATask(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "a", Prompt: "x", Timeout: protocol.Duration(time.Minute)}, prompt("b")))
	claim(t, a1, "p", "a")
	before := e.show(t, "p", "a")
	_, err := a2.Complete(ctxT(t), "p", "a", protocol.BoardResult{Summary: "mine now"})
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a2.Renew(ctxT(t), "p", "a")
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a2.Fail(ctxT(t), "p", "a", "sabotage", nil)
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a2.Release(ctxT(t), "p", "a", "")
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a1.Complete(ctxT(t), "p", "b", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotReady)
	_, err = a1.Complete(ctxT(t), "p", "zz", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotFound)
	_, err = e.op.Complete(ctxT(t), "p", "a", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrForbidden)
	if after := e.show(t, "p", "a"); after.Revision != before.Revision {
		t.Fatalf("refusals changed the task: %+v", after)
	}
	// Renew: the lease runs a lease from now, never past the claim's
	// deadline (claimed at plus the task's timeout of a minute).
	e.clk.Advance(10 * time.Second)
	r := must[*protocol.BoardTask](t)(a1.Renew(ctxT(t), "p", "a"))
	if !r.LeaseUntil.Equal(e.clk.Now().Add(protocol.DefaultBoardLease)) || !r.RenewedAt.Equal(e.clk.Now()) || r.Attempts != 1 {
		t.Fatalf("renewed: %+v", r)
	}
	e.clk.Advance(25 * time.Second)
	r = must[*protocol.BoardTask](t)(a1.Renew(ctxT(t), "p", "a"))
	if !r.LeaseUntil.Equal(r.ClaimedAt.Add(time.Minute)) {
		t.Fatalf("renewed past its deadline: %+v", r)
	}
}

// complete keeps the result and makes ready the tasks whose needs are now
// all done; fail keeps the reason and the result, and the tasks that need
// the failed one stay blocked, saying so.
func TestCompleteAndFail(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.apply(t, plan("p", prompt("a"), prompt("b"), prompt("c", "a", "b"), prompt("d", "c"), prompt("f"), prompt("g", "f")))
	claim(t, a1, "p", "a")
	done := must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "a", protocol.BoardResult{Summary: "a done", Artifacts: []string{"a.txt"}}))
	if done.Status != protocol.BoardDone || done.Result.Summary != "a done" || done.Holder != "agent-1" || !done.LeaseUntil.IsZero() {
		t.Fatalf("completed: %+v", done)
	}
	if c := e.status(t, "p", "c", protocol.BoardBlocked); c.Reason != "waits for b" {
		t.Fatalf("c waits: %q", c.Reason)
	}
	claim(t, a1, "p", "b")
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "b", protocol.BoardResult{}))
	e.status(t, "p", "c", protocol.BoardReady)
	e.status(t, "p", "d", protocol.BoardBlocked)

	// A result that breaks a rule is refused, and the task stays claimed.
	claim(t, a1, "p", "f")
	_, err := a1.Complete(ctxT(t), "p", "f", protocol.BoardResult{Artifacts: []string{"../../etc/passwd"}})
	be := refused(t, err, protocol.BoardErrInvalid)
	if !strings.Contains(be.Msg, "result.artifacts[0]") {
		t.Errorf("refusal: %s", be.Msg)
	}
	_, err = a1.Fail(ctxT(t), "p", "f", strings.Repeat("r", protocol.MaxBoardReason+1), nil)
	refused(t, err, protocol.BoardErrInvalid)
	e.status(t, "p", "f", protocol.BoardClaimed)

	one := 1
	failed := must[*protocol.BoardTask](t)(a1.Fail(ctxT(t), "p", "f", "the tests do not pass", &protocol.BoardResult{Summary: "3 failures", ExitCode: &one}))
	if failed.Status != protocol.BoardFailed || failed.Reason != "the tests do not pass" || failed.Result == nil || *failed.Result.ExitCode != 1 {
		t.Fatalf("failed: %+v", failed)
	}
	g := e.status(t, "p", "g", protocol.BoardBlocked)
	if g.Reason != "needs f, which failed" {
		t.Errorf("g: reason %q", g.Reason)
	}
	listed := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p", protocol.BoardBlocked))
	if len(listed) != 2 || listed[1].ID != "g" || listed[1].Reason != "needs f, which failed" {
		t.Errorf("blocked list: %+v", listed)
	}
}

// release hands the task back: ready, holder cleared, the attempt given
// back (a release is not a failure).
func TestRelease(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	ready := listen(t, e.f.Connect(t, "agent-2"), protocol.SubjectBoardReady)
	e.apply(t, plan("p", prompt("a")))
	select {
	case <-ready: // the apply's
	case <-time.After(2 * time.Second):
		t.Fatal("no ready bell after an apply")
	}
	claim(t, a1, "p", "a")
	r := must[*protocol.BoardTask](t)(a1.Release(ctxT(t), "p", "a", "not my field"))
	if r.Status != protocol.BoardReady || r.Holder != "" || r.Attempts != 0 || !r.LeaseUntil.IsZero() || r.Reason != "released by agent-1: not my field" {
		t.Fatalf("released: %+v", r)
	}
	select {
	case <-ready:
	case <-time.After(2 * time.Second):
		t.Fatal("no ready bell after a release")
	}
	if got := claim(t, a2, "", ""); got.ID != "a" || got.Attempts != 1 {
		t.Fatalf("agent-2 claimed %+v", got)
	}
}
