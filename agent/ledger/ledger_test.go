package ledger

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

var day = Budget{Tokens: 1000, Window: protocol.WindowDay}

// Reservations are admitted while spent and reserved tokens are below the
// limit: the batch overshoots by at most the last admitted bound.
func TestApplyAdmitsBelowTheLimitOnly(t *testing.T) {
	t.Parallel()
	var e protocol.LedgerEntry
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ops := []*reserveOp{{bound: 400}, {bound: 400}, {bound: 400}, {bound: 1}}
	apply(&e, "agent-1", now, day, nil, ops)
	var admitted []int64
	for _, op := range ops {
		if op.adm.OK {
			admitted = append(admitted, op.bound)
		}
	}
	if len(admitted) != 3 || e.Spent != 1200 {
		t.Errorf("admitted %v, spent %d: want 3 calls (the third crosses the limit) and 1200", admitted, e.Spent)
	}
	if ops[3].adm.OK || ops[3].adm.Used != 1200 || ops[3].adm.Limit != 1000 || !ops[3].adm.Reset.Equal(now.Truncate(24*time.Hour).Add(24*time.Hour)) {
		t.Errorf("the refusal: %+v", ops[3].adm)
	}
	// Settling: each call's bound is replaced by its cost.
	owed := map[int64]carry{}
	for _, op := range ops[:3] {
		owe(owed, op.adm.Reservation, 10)
	}
	apply(&e, "agent-1", now, day, owed, nil)
	if e.Spent != 30 {
		t.Errorf("after settling three calls of 10: spent %d", e.Spent)
	}
}

// A reservation made before the entry started over (a new day, an
// operator's reset) is charged its cost in the new period, not corrected
// against a bound the new period never held.
func TestApplyChargesOldReservationsTheirCost(t *testing.T) {
	t.Parallel()
	var e protocol.LedgerEntry
	before := time.Date(2026, 11, 26, 23, 59, 0, 0, time.UTC)
	op := &reserveOp{bound: 500}
	apply(&e, "agent-1", before, day, nil, []*reserveOp{op})
	if e.Spent != 500 || e.Period != "2026-11-26" {
		t.Fatalf("%+v", e)
	}
	after := before.Add(2 * time.Minute)
	owed := map[int64]carry{}
	owe(owed, op.adm.Reservation, 70)
	apply(&e, "agent-1", after, day, owed, nil)
	if e.Spent != 70 || e.Period != "2026-11-27" || e.Epoch != 1 {
		t.Errorf("a call across midnight: %+v, want 70 spent in 2026-11-27", e)
	}
	// And a window the operator changed starts the entry over too.
	apply(&e, "agent-1", after, Budget{Tokens: 1000, Window: protocol.WindowMonth}, nil, nil)
	if e.Spent != 0 || e.Period != "2026-11" || e.Epoch != 2 {
		t.Errorf("a new window: %+v", e)
	}
}

func TestApplySaturates(t *testing.T) {
	t.Parallel()
	e := protocol.LedgerEntry{Spent: math.MaxInt64 - 1}
	owed := map[int64]carry{noEpoch: {cost: math.MaxInt64}}
	apply(&e, "a", time.Now(), Budget{}, owed, nil)
	if e.Spent != math.MaxInt64 {
		t.Errorf("spent wrapped: %d", e.Spent)
	}
	owed = map[int64]carry{}
	owe(owed, Reservation{agent: "a", bound: 5, epoch: e.Epoch}, -7) // a negative cost is none
	apply(&e, "a", time.Now(), Budget{}, owed, nil)
	if e.Spent != math.MaxInt64-5 {
		t.Errorf("a negative cost: %d", e.Spent)
	}
}

// Memory: 40 concurrent calls of bound 100 against 1,000 tokens left 950
// spent: exactly one is admitted.
func TestMemoryConcurrentReservations(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	b := Budget{Tokens: 1000}
	r, _ := m.Reserve(context.Background(), "agent-1", b, 950)
	m.Settle(r.Reservation, 950)
	ok := testkit.CountAtOnce(t, 40, func(int) (bool, error) {
		adm, err := m.Reserve(context.Background(), "agent-1", b, 100)
		return adm.OK, err
	})
	if ok != 1 {
		t.Errorf("%d of 40 admitted, want 1", ok)
	}
	if e := m.Known("agent-1", b); e.Spent != 1050 {
		t.Errorf("spent or reserved %d, want 1050", e.Spent)
	}
}

// The memory ledger's window starts over at midnight UTC.
func TestMemoryWindow(t *testing.T) {
	t.Parallel()
	m := NewMemory()
	now := time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	adm, _ := m.Reserve(context.Background(), "agent-1", day, 2000)
	m.Settle(adm.Reservation, 2000)
	if adm, _ := m.Reserve(context.Background(), "agent-1", day, 1); adm.OK {
		t.Fatal("admitted over the budget")
	}
	now = now.Add(time.Hour)
	if adm, _ := m.Reserve(context.Background(), "agent-1", day, 1); !adm.OK {
		t.Errorf("refused on a new day: %+v", adm)
	}
}
