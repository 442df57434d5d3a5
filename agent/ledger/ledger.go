// Package ledger keeps what each agent's model calls cost against its
// budget: in memory (Memory, a gateway on its own) or in the bus's key-value
// bucket (Bus), where a restarted, redeployed or second gateway continues
// from the same totals.
//
// A metered call reserves its bound before it is forwarded: it is admitted
// while the agent's spent and reserved tokens are below its limit, and the
// bound is charged (durably, in Bus, before the call goes out). When the call
// ends, Settle replaces the bound by the cost. So concurrent calls overshoot
// a budget by at most one call's bound, and a gateway that dies mid-call
// leaves the bound charged, never nothing.
package ledger

import (
	"context"
	"math"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Budget is an agent's budget as the gateway's configuration gives it.
type Budget struct {
	Tokens int64  // 0: no cap
	Window string // protocol.WindowNone, WindowDay, WindowMonth
}

// Admission is a reservation's answer.
type Admission struct {
	OK bool
	// Limit is the agent's limit in force (budget and what the operator
	// raised it by), Used what it had spent or reserved before this call.
	Limit, Used int64
	Reset       time.Time // when the window starts over (zero: never)
	Reservation Reservation
	// Bound is what was reserved: the bound asked, or less for ReserveUpTo.
	Bound int64
	// Pending is how much of Used this ledger holds for the agent's calls
	// not yet settled: a refusal they explain passes once they end.
	Pending int64
}

// Reservation is what Settle needs of an admitted call.
type Reservation struct {
	agent string
	bound int64
	epoch int64 // the entry's epoch it was charged in; noEpoch: nothing held
}

// noEpoch marks a call that reserved nothing (its agent has no cap): its
// cost is charged when it ends, in whatever period that is.
const noEpoch = -1

// Ledger is what the gateway meters with.
type Ledger interface {
	// Reserve admits a call of the given bound for agent, or refuses it
	// when the agent's spending has reached its limit. An error means the
	// ledger could not be reached: the call must not be forwarded.
	Reserve(ctx context.Context, agent string, b Budget, bound int64) (Admission, error)
	// ReserveUpTo is Reserve for a call whose bound may shrink to fit what
	// is left of the limit, down to least: it reserves min(most, left),
	// and refuses when that is below least. An agent without a cap gets
	// most.
	ReserveUpTo(ctx context.Context, agent string, b Budget, most, least int64) (Admission, error)
	// Settle ends a reservation: the agent is charged cost instead of the
	// bound. It never waits for the bus; it returns the agent's spending as
	// far as the ledger knows it.
	Settle(r Reservation, cost int64) int64
	// Known is the agent's entry as last seen (no round trip): for a quick
	// refusal of an agent already over its limit.
	Known(agent string, b Budget) protocol.LedgerEntry
	// Pending is what this ledger holds reserved for agent's calls not yet
	// settled (part of Known's Spent).
	Pending(agent string) int64
}

// carry is what calls that ended owe an entry, per epoch: the corrections
// (cost - bound) of reservations made in that epoch and, should the entry
// have started over since, their costs alone.
type carry struct{ delta, cost int64 }

// apply brings e up to now and b, applies what ended calls owe, then admits
// or refuses each reservation in turn. It is the whole accounting, shared by
// Memory and Bus.
func apply(e *protocol.LedgerEntry, agent string, now time.Time, b Budget, owed map[int64]carry, ops []*reserveOp) {
	e.V, e.Agent = 1, agent
	e.Roll(b.Window, now)
	e.Budget = b.Tokens
	for epoch, c := range owed {
		if epoch == e.Epoch {
			e.Spent = max(0, sat(e.Spent, c.delta))
		} else {
			e.Spent = sat(e.Spent, c.cost)
		}
	}
	for _, op := range ops {
		limit := e.Limit()
		op.adm = Admission{Limit: limit, Used: e.Spent, Reset: e.Reset}
		if limit > 0 && e.Spent >= limit {
			continue
		}
		bound := op.bound
		if op.least > 0 && limit > 0 {
			left := limit - e.Spent
			if left < op.least {
				continue
			}
			bound = min(bound, left)
		}
		e.Spent = sat(e.Spent, bound)
		op.adm.OK, op.adm.Bound = true, bound
		op.adm.Reservation = Reservation{agent: agent, bound: bound, epoch: e.Epoch}
	}
	e.Updated, e.By = now.UTC(), "gateway"
}

// owe records a settled call in owed.
func owe(owed map[int64]carry, r Reservation, cost int64) {
	cost = max(cost, 0)
	c := owed[r.epoch]
	c.cost = sat(c.cost, cost)
	if r.epoch != noEpoch {
		c.delta = c.delta + cost - r.bound
	}
	owed[r.epoch] = c
}

// reserveOp is one call waiting for its admission.
type reserveOp struct {
	bound int64
	least int64 // ReserveUpTo's: the bound may shrink to fit, down to this; 0: it may not
	adm   Admission
}

// uncapped admits a call of an agent without a cap: nothing is held.
func uncapped(agent string, bound int64) Admission {
	return Admission{OK: true, Bound: bound, Reservation: Reservation{agent: agent, bound: bound, epoch: noEpoch}}
}

// sat adds two counts, saturating at MaxInt64 (a negative b subtracts).
func sat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
