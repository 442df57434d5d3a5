package board_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A claim lasts a lease (30 s) unrenewed: a holder that renews keeps it;
// one that goes silent loses it within a lease (ready again, the attempt
// counted; failed on its last attempt). Whatever the renewals, a claim
// ends at claimed-at plus the task's timeout: failed, timed out. The
// tasks that need it stay blocked, saying why.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "slow", Prompt: "x", Attempts: 2, Timeout: protocol.Duration(2 * time.Minute)}, prompt("after", "slow")))

	claim(t, a1, "p", "slow")
	e.clk.Advance(20 * time.Second)
	must[*protocol.BoardTask](t)(a1.Renew(ctxT(t), "p", "slow"))
	e.clk.Advance(20 * time.Second) // 40 s after the claim, 20 s after the renewal
	time.Sleep(50 * time.Millisecond)
	e.status(t, "p", "slow", protocol.BoardClaimed)

	e.clk.Advance(20 * time.Second) // silent for 40 s
	back := e.waitStatus(t, "p", "slow", protocol.BoardReady)
	if back.Holder != "" || back.Attempts != 1 || back.Reason != "lease expired: its holder agent-1 silent for 40s (the lease is 30s) (attempt 1 of 2)" || !back.LeaseUntil.IsZero() {
		t.Fatalf("taken back: %+v", back)
	}
	_, err := a1.Complete(ctxT(t), "p", "slow", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotReady)

	if got := claim(t, a2, "", ""); got.ID != "slow" || got.Attempts != 2 {
		t.Fatalf("second claim: %+v", got)
	}
	// Renewed every 20 s, it still ends 2 minutes after its claim.
	for range 5 {
		e.clk.Advance(20 * time.Second)
		must[*protocol.BoardTask](t)(a2.Renew(ctxT(t), "p", "slow"))
	}
	time.Sleep(50 * time.Millisecond)
	e.status(t, "p", "slow", protocol.BoardClaimed)
	e.clk.Advance(20 * time.Second)
	failed := e.waitStatus(t, "p", "slow", protocol.BoardFailed)
	if !strings.HasPrefix(failed.Reason, "timed out: held by agent-2 since ") || !strings.HasSuffix(failed.Reason, "past its timeout of 2m0s") || failed.Attempts != 2 {
		t.Fatalf("timed out: %+v", failed)
	}
	_, err = a2.Renew(ctxT(t), "p", "slow")
	refused(t, err, protocol.BoardErrNotReady)
	after := e.status(t, "p", "after", protocol.BoardBlocked)
	if after.Reason != "needs slow, which failed" {
		t.Fatalf("dependent: %q", after.Reason)
	}
	// The holder's claim is gone: it may claim again (its limit is 1).
	_, err = a2.Claim(ctxT(t), "", "", "")
	refused(t, err, protocol.BoardErrNothing)
}
