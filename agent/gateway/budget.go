package gateway

import (
	"math"
	"sync"
)

// ledger keeps each agent's tokens spent since the gateway started, and
// checks them against its budget before a call. A call is charged once its
// response is complete, so calls already in flight when an agent reaches its
// budget still finish: the agent can overshoot by what those calls cost.
// The counts live in memory only; a restarted gateway starts from zero.
type ledger struct {
	limits map[string]int64 // absent: unlimited
	*Spending
}

// Spending is what each agent has spent. A gateway made again from a new
// configuration (a reload) is given the old one's, so that no agent's total
// starts over.
type Spending struct {
	mu    sync.Mutex
	spent map[string]int64
}

// NewSpending is an empty Spending.
func NewSpending() *Spending { return &Spending{spent: map[string]int64{}} }

func newLedger(limits map[string]int64, s *Spending) *ledger {
	if s == nil {
		s = NewSpending()
	}
	l := &ledger{limits: make(map[string]int64, len(limits)), Spending: s}
	for agent, n := range limits {
		l.limits[agent] = n
	}
	return l
}

// over says whether agent has used up its budget, with the limit and the
// amount spent.
func (l *ledger) over(agent string) (limit, spent int64, over bool) {
	limit, capped := l.limits[agent]
	if !capped {
		return 0, 0, false
	}
	l.mu.Lock()
	spent = l.spent[agent]
	l.mu.Unlock()
	return limit, spent, spent >= limit
}

// charge adds tokens to agent's total and returns the total. It saturates
// rather than wraps: a total past MaxInt64 is still over any budget.
func (l *ledger) charge(agent string, tokens int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.spent[agent]
	if tokens <= 0 {
		return s
	}
	if s > math.MaxInt64-tokens {
		s = math.MaxInt64
	} else {
		s += tokens
	}
	l.spent[agent] = s
	return s
}

func (l *ledger) get(agent string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[agent]
}

// budget is agent's limit, 0 when it has none.
func (l *ledger) budget(agent string) int64 { return l.limits[agent] }

// inFlight counts each agent's requests in flight against a cap.
type inFlight struct {
	max int

	mu sync.Mutex
	n  map[string]int // absent: none; an agent's entry goes when it drops to 0
}

func newInFlight(max int) *inFlight { return &inFlight{max: max, n: make(map[string]int)} }

// acquire takes one of agent's slots; false when it has none left.
func (f *inFlight) acquire(agent string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[agent] >= f.max {
		return false
	}
	f.n[agent]++
	return true
}

func (f *inFlight) release(agent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[agent] <= 1 {
		delete(f.n, agent)
		return
	}
	f.n[agent]--
}
