package board_test

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A lease that runs out gives the task back (the attempt counted); the
// last attempt's lease running out fails it, and the tasks that need it
// stay blocked, saying why. A renewed lease does not run out.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "slow", Prompt: "x", Attempts: 2, Timeout: protocol.Duration(time.Minute)}, prompt("after", "slow")))

	claim(t, a1, "p", "slow")
	e.clk.Advance(45 * time.Second)
	must[*protocol.BoardTask](t)(a1.Renew(ctxT(t), "p", "slow"))
	e.clk.Advance(45 * time.Second) // 90 s after the claim, 45 s after the renewal
	time.Sleep(50 * time.Millisecond)
	e.status(t, "p", "slow", protocol.BoardClaimed)

	e.clk.Advance(30 * time.Second)
	back := e.waitStatus(t, "p", "slow", protocol.BoardReady)
	if back.Holder != "" || back.Attempts != 1 || back.Reason != "lease expired (held by agent-1)" || !back.LeaseUntil.IsZero() {
		t.Fatalf("taken back: %+v", back)
	}
	_, err := a1.Complete(ctxT(t), "p", "slow", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotReady)

	if got := claim(t, a2, "", ""); got.ID != "slow" || got.Attempts != 2 {
		t.Fatalf("second claim: %+v", got)
	}
	e.clk.Advance(61 * time.Second)
	failed := e.waitStatus(t, "p", "slow", protocol.BoardFailed)
	if failed.Reason != "lease expired (held by agent-2); out of attempts (2 of 2)" || failed.Attempts != 2 {
		t.Fatalf("out of attempts: %+v", failed)
	}
	after := e.status(t, "p", "after", protocol.BoardBlocked)
	if after.Reason != "needs slow, which failed" {
		t.Fatalf("dependent: %q", after.Reason)
	}
	// The holder's claim is gone: it may claim again (its limit is 1).
	_, err = a2.Claim(ctxT(t), "", "", "")
	refused(t, err, protocol.BoardErrNothing)
}
