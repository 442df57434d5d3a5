package gateway

import (
	"math"
	"sync"
)

// ledger keeps each agent's tokens spent since the gateway started, and
// checks them against its budget before a call. A metered call reserves its
// bound (output cap and input estimate) before it is forwarded and is
// admitted only while the agent's spent and reserved tokens are below its
// budget; when it ends the reservation is replaced by what it cost. So
// concurrent calls overshoot a budget by at most one call's bound. The
// counts live in memory only; a restarted gateway starts from zero.
type ledger struct {
	limits map[string]int64 // absent: unlimited
	*Spending
}

// Spending is what each agent has spent. A gateway made again from a new
// configuration (a reload) is given the old one's, so that no agent's total
// starts over.
type Spending struct {
	mu       sync.Mutex
	spent    map[string]int64
	reserved map[string]int64 // the bounds of calls in flight
}

// NewSpending is an empty Spending.
func NewSpending() *Spending {
	return &Spending{spent: map[string]int64{}, reserved: map[string]int64{}}
}

// reserve admits a call of the given bound for agent if its spent and
// reserved tokens are below its budget (always, without a budget), and
// holds the bound until settle.
func (l *ledger) reserve(agent string, bound int64) (limit, used int64, ok bool) {
	limit, capped := l.limits[agent]
	l.mu.Lock()
	defer l.mu.Unlock()
	used = sat(l.spent[agent], l.reserved[agent])
	if capped && used >= limit {
		return limit, used, false
	}
	l.reserved[agent] = sat(l.reserved[agent], bound)
	return limit, used, true
}

// settle ends a reservation of bound: agent is charged cost instead. It
// returns the agent's total spent.
func (l *ledger) settle(agent string, bound, cost int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserved[agent] -= bound; l.reserved[agent] <= 0 {
		delete(l.reserved, agent)
	}
	l.spent[agent] = sat(l.spent[agent], max(cost, 0))
	return l.spent[agent]
}

// reservedOf is what agent's calls in flight hold.
func (l *ledger) reservedOf(agent string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserved[agent]
}

// sat adds two non-negative counts, saturating at MaxInt64.
func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

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

// The memory metered request bodies may hold: a body is read whole, decoded
// once into its top-level fields and maybe encoded again (bodyCost: three
// times its size), and the gateway runs in a container of 128 MiB.
const (
	maxBufferedBodies   = 64 << 20
	maxBufferedPerAgent = 40 << 20
)

func bodyCost(size int64) int64 { return 3 * size }

// bodyBudget bounds the bytes held for request bodies, in all and per agent:
// one agent sending its largest bodies at once holds its share, and the
// others still get theirs.
type bodyBudget struct {
	mu              sync.Mutex
	total, perAgent int64
	used            int64
	by              map[string]int64
}

func newBodyBudget(total, perAgent int64) *bodyBudget {
	return &bodyBudget{total: total, perAgent: perAgent, by: map[string]int64{}}
}

// acquire takes n bytes for agent, or fails without waiting.
func (b *bodyBudget) acquire(agent string, n int64) (release func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.by[agent]+n > b.perAgent {
		return nil, false
	}
	b.used += n
	b.by[agent] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			if b.by[agent] -= n; b.by[agent] <= 0 {
				delete(b.by, agent)
			}
		})
	}, true
}
