package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Memory is a ledger held by one gateway process: a restart starts every
// agent over. It is what a gateway off the bus meters with, and what a
// reload hands on to the gateway that replaces it.
type Memory struct {
	mu      sync.Mutex
	entries map[string]*protocol.LedgerEntry
	pending map[string]int64 // bounds reserved and not yet settled
	now     func() time.Time
}

// NewMemory is an empty Memory.
func NewMemory() *Memory {
	return &Memory{entries: map[string]*protocol.LedgerEntry{}, pending: map[string]int64{}, now: time.Now}
}

func (m *Memory) entry(agent string) *protocol.LedgerEntry {
	e := m.entries[agent]
	if e == nil {
		e = &protocol.LedgerEntry{}
		m.entries[agent] = e
	}
	return e
}

// Reserve admits or refuses at once; it never fails.
func (m *Memory) Reserve(ctx context.Context, agent string, b Budget, bound int64) (Admission, error) {
	return m.ReserveUpTo(ctx, agent, b, bound, 0)
}

// ReserveUpTo admits or refuses at once; it never fails.
func (m *Memory) ReserveUpTo(_ context.Context, agent string, b Budget, most, least int64) (Admission, error) {
	if b.Tokens <= 0 {
		return uncapped(agent, most), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	op := &reserveOp{bound: most, least: least}
	apply(m.entry(agent), agent, m.now(), b, nil, []*reserveOp{op})
	op.adm.Pending = m.pending[agent]
	if op.adm.OK {
		m.pending[agent] += op.adm.Bound
	}
	return op.adm, nil
}

// Settle charges cost in place of the reservation's bound.
func (m *Memory) Settle(r Reservation, cost int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(r.agent)
	m.unpend(r)
	owed := map[int64]carry{}
	owe(owed, r, cost)
	apply(e, r.agent, m.now(), Budget{Tokens: e.Budget, Window: e.Window}, owed, nil)
	return e.Spent
}

// Known is the agent's entry, brought up to now.
func (m *Memory) Known(agent string, b Budget) protocol.LedgerEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := *m.entry(agent)
	e.Roll(b.Window, m.now())
	e.Budget = b.Tokens
	return e
}

// unpend takes a settled reservation out of what is pending. m.mu is held.
func (m *Memory) unpend(r Reservation) {
	if r.epoch == noEpoch {
		return
	}
	if m.pending[r.agent] -= r.bound; m.pending[r.agent] <= 0 {
		delete(m.pending, r.agent)
	}
}

// Pending is what agent's calls hold reserved and have not settled.
func (m *Memory) Pending(agent string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending[agent]
}
