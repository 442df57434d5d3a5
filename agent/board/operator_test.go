package board_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

// cancel: any task not done (a claimed one too: its holder can no longer
// complete it); retry: a failed or cancelled one, back to ready or blocked
// by its needs, attempts, holder, lease and result cleared. Both are the
// operator's.
func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.apply(t, plan("p", prompt("a"), prompt("b", "a"), prompt("c"), prompt("d")))

	c := must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "p", "b", "not needed"))
	if c.Status != protocol.BoardCancelled || c.Reason != "cancelled by the operator: not needed" {
		t.Fatalf("cancelled: %+v", c)
	}
	again := must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "p", "b", ""))
	if again.Revision != c.Revision {
		t.Fatalf("cancelling a cancelled task wrote it: %+v", again)
	}
	claim(t, a1, "p", "a")
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "p", "a", ""))
	_, err := a1.Complete(ctxT(t), "p", "a", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotReady)
	claim(t, a1, "p", "c")
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "c", protocol.BoardResult{Summary: "c"}))
	_, err = e.op.Cancel(ctxT(t), "p", "c", "")
	refused(t, err, protocol.BoardErrNotReady)
	_, err = e.op.Cancel(ctxT(t), "p", "zz", "")
	refused(t, err, protocol.BoardErrNotFound)
	_, err = a1.Cancel(ctxT(t), "p", "d", "")
	refused(t, err, protocol.BoardErrForbidden)

	// Retry: a (cancelled while claimed) comes back ready, as new.
	r := must[*protocol.BoardTask](t)(e.op.Retry(ctxT(t), "p", "a"))
	if r.Status != protocol.BoardReady || r.Attempts != 0 || r.Holder != "" || !r.LeaseUntil.IsZero() || r.Result != nil || r.Reason != "" {
		t.Fatalf("retried: %+v", r)
	}
	// b needs a, which is not done again yet: blocked.
	if b := must[*protocol.BoardTask](t)(e.op.Retry(ctxT(t), "p", "b")); b.Status != protocol.BoardBlocked {
		t.Fatalf("b retried: %+v", b)
	}
	claim(t, a1, "p", "a")
	must[*protocol.BoardTask](t)(a1.Fail(ctxT(t), "p", "a", "broken", nil))
	if r := must[*protocol.BoardTask](t)(e.op.Retry(ctxT(t), "p", "a")); r.Status != protocol.BoardReady {
		t.Fatalf("a retried after failing: %+v", r)
	}
	for _, id := range []string{"a", "c"} { // ready, done
		_, err = e.op.Retry(ctxT(t), "p", id)
		refused(t, err, protocol.BoardErrNotReady)
	}
	_, err = a1.Retry(ctxT(t), "p", "a")
	refused(t, err, protocol.BoardErrForbidden)
}
