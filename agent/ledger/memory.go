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
	now     func() time.Time
}

// NewMemory is an empty Memory.
func NewMemory() *Memory {
	return &Memory{entries: map[string]*protocol.LedgerEntry{}, now: time.Now}
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
func (m *Memory) Reserve(_ context.Context, agent string, b Budget, bound int64) (Admission, error) {
	if b.Tokens <= 0 {
		return Admission{OK: true, Reservation: Reservation{agent: agent, bound: bound, epoch: noEpoch}}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	op := &reserveOp{bound: bound}
	apply(m.entry(agent), agent, m.now(), b, nil, []*reserveOp{op})
	return op.adm, nil
}

// Settle charges cost in place of the reservation's bound.
func (m *Memory) Settle(r Reservation, cost int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entry(r.agent)
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
