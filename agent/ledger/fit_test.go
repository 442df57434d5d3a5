package ledger_test

import (
	"context"
	"testing"

	"github.com/ai-flock/ai-flock/agent/ledger"
)

// Both ledgers, the same rules: a call whose bound may shrink reserves what
// is left of the limit, down to its least; what is reserved and not yet
// settled is pending, and settled it is never counted at its bound again.
func TestReserveUpToAndPending(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) ledger.Ledger{
		"memory": func(t *testing.T) ledger.Ledger { t.Parallel(); return ledger.NewMemory() },
		"bus":    func(t *testing.T) ledger.Ledger { _, l := gatewayBus(t, 1); return l },
	} {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			ctx := context.Background()
			b := ledger.Budget{Tokens: 2000}
			// A first call asking 4,104 of a 2,000-token budget gets the 2,000.
			adm, err := l.ReserveUpTo(ctx, "agent-1", b, 4104, 264)
			if err != nil || !adm.OK || adm.Bound != 2000 || adm.Pending != 0 {
				t.Fatalf("first call: %+v %v, want 2000 reserved", adm, err)
			}
			if p := l.Pending("agent-1"); p != 2000 {
				t.Errorf("pending %d during the call, want 2000", p)
			}
			// Refused while it is in flight, and the refusal says why.
			r, err := l.ReserveUpTo(ctx, "agent-1", b, 4104, 264)
			if err != nil || r.OK || r.Used != 2000 || r.Pending != 2000 {
				t.Errorf("second call while the first holds the budget: %+v %v, want refused with 2000 pending", r, err)
			}
			// Settled at 1,800: known at once, nothing pending.
			l.Settle(adm.Reservation, 1800)
			if e := l.Known("agent-1", b); e.Spent != 1800 {
				t.Errorf("known after settling: %d, want 1800 (not the bound)", e.Spent)
			}
			if p := l.Pending("agent-1"); p != 0 {
				t.Errorf("pending %d after settling, want 0", p)
			}
			// 200 left: below the least, refused; a plain Reserve is admitted.
			if r, err := l.ReserveUpTo(ctx, "agent-1", b, 4104, 264); err != nil || r.OK || r.Used != 1800 || r.Pending != 0 {
				t.Errorf("200 left, least 264: %+v %v, want refused", r, err)
			}
			if r, err := l.ReserveUpTo(ctx, "agent-1", b, 4104, 150); err != nil || !r.OK || r.Bound != 200 {
				t.Errorf("200 left, least 150: %+v %v, want 200 reserved", r, err)
			} else {
				l.Settle(r.Reservation, 0)
			}
			if r, err := l.Reserve(ctx, "agent-1", b, 4104); err != nil || !r.OK || r.Bound != 4104 {
				t.Errorf("a plain Reserve below the limit: %+v %v, want its bound admitted", r, err)
			}
			// No cap: the whole bound, nothing pending.
			if r, err := l.ReserveUpTo(ctx, "agent-2", ledger.Budget{}, 4104, 264); err != nil || !r.OK || r.Bound != 4104 || l.Pending("agent-2") != 0 {
				t.Errorf("no cap: %+v %v", r, err)
			}
		})
	}
}

// The gateway's ledger on the bus counts a settled call at its cost in
// Known at once, before its writer has written it: the next call of an
// agent at the end of its budget is not refused for a reservation that
// already ended.
func TestBusKnownCountsSettledCallsAtOnce(t *testing.T) {
	f, l := gatewayBus(t, 1)
	ctx := context.Background()
	b := ledger.Budget{Tokens: 600}
	adm, err := l.Reserve(ctx, "agent-1", b, 543)
	if err != nil || !adm.OK {
		t.Fatal(adm, err)
	}
	l.Settle(adm.Reservation, 500)
	for i := range 50 {
		adm, err := l.Reserve(ctx, "agent-1", b, 74)
		if err != nil || !adm.OK {
			t.Fatalf("call %d: %+v %v", i, adm, err)
		}
		l.Settle(adm.Reservation, 1)
		// Right after the settlement, as the agent's next call would see it.
		if e := l.Known("agent-1", b); e.Spent != int64(501+i) {
			t.Fatalf("call %d: known %d right after it settled, want %d", i, e.Spent, 501+i)
		}
	}
	drain(t, l)
	if e := entry(t, f, "agent-1"); e.Spent != 550 {
		t.Errorf("the bucket holds %d, want 550", e.Spent)
	}
}
