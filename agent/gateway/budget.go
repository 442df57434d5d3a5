package gateway

import "sync"

// ledger keeps each agent's tokens spent since the gateway started, and
// checks them against its budget before a call. A call is charged once its
// response is complete, so calls already in flight when an agent reaches its
// budget still finish: the agent can overshoot by what those calls cost.
// The counts live in memory only; a restarted gateway starts from zero.
type ledger struct {
	limits map[string]int64 // absent: unlimited

	mu    sync.Mutex
	spent map[string]int64
}

func newLedger(limits map[string]int64) *ledger {
	l := &ledger{limits: make(map[string]int64, len(limits)), spent: make(map[string]int64)}
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

func (l *ledger) charge(agent string, tokens int64) {
	if tokens <= 0 {
		return
	}
	l.mu.Lock()
	l.spent[agent] += tokens
	l.mu.Unlock()
}

func (l *ledger) get(agent string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spent[agent]
}
