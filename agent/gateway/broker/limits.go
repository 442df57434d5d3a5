package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
)

// What a rule bounds per agent: its request rate (each gateway's, in
// memory: a restart or a reload starts it over), its byte budget (the
// bus's ledger, under protocol.EgressLedgerKey, so a restarted gateway continues from the
// same totals) and the size of one request's and one response's body.

// budgetChunk is how much of a budget one reservation holds: a body takes
// its bytes from the ledger a chunk at a time, so concurrent requests of an
// agent share what is left and a long download stops where it runs out.
const budgetChunk = 4 << 20

var (
	errBudget       = errors.New("egress budget spent")
	errRequestSize  = errors.New("request body past the rule's maxRequestBytes")
	errResponseSize = errors.New("response body past the rule's maxResponseBytes")
)

// ledgerBudget is a rule's budget as the ledger keeps it.
func ledgerBudget(b *rules.Budget) ledger.Budget {
	w := protocol.WindowDay
	switch b.Window {
	case rules.WindowMonth:
		w = protocol.WindowMonth
	case rules.WindowNone:
		w = protocol.WindowNone
	}
	return ledger.Budget{Tokens: b.Bytes, Window: w}
}

type limitKey struct{ agent, rule string }

// rates are the request limiters, one per agent and rule with a rate.
type rates struct {
	mu sync.Mutex
	by map[limitKey]*rate.Limiter
}

// allow takes one request of agent's under r; when refused it says how
// long until one is let through.
func (rs *rates) allow(agent string, r *rules.Rule) (bool, time.Duration) {
	if r.RequestsPerMinute <= 0 {
		return true, 0
	}
	k := limitKey{agent, r.Key()}
	rs.mu.Lock()
	if rs.by == nil {
		rs.by = map[limitKey]*rate.Limiter{}
	}
	l, ok := rs.by[k]
	if !ok {
		// A minute's requests at once, then steadily: an install's burst
		// of small requests passes, a sustained flood does not.
		l = rate.NewLimiter(rate.Limit(float64(r.RequestsPerMinute)/60), r.RequestsPerMinute)
		rs.by[k] = l
	}
	rs.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}

// meter is one request's share of its agent's budget under a rule: the
// bytes its bodies moved both ways, and what it holds of the ledger.
type meter struct {
	l      ledger.Ledger
	key    string
	budget ledger.Budget

	mu       sync.Mutex
	held     []ledger.Reservation
	bounds   []int64
	reserved int64 // the bounds' sum
	used     int64
	adm      ledger.Admission // the last answer: its limit and reset, for a refusal
}

// reserve takes another chunk of the budget (or what is left of it).
func (m *meter) reserve(ctx context.Context) error {
	adm, err := m.l.ReserveUpTo(ctx, m.key, m.budget, budgetChunk, 1)
	if err != nil {
		return err
	}
	m.adm = adm
	if !adm.OK {
		return errBudget
	}
	m.held, m.bounds = append(m.held, adm.Reservation), append(m.bounds, adm.Bound)
	m.reserved += adm.Bound
	return nil
}

// room is how much of n bytes a body may read now, reserving more of the
// budget when what the request holds is used up.
func (m *meter) room(n int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used >= m.reserved {
		if err := m.reserve(context.Background()); err != nil {
			return 0, err
		}
	}
	return int(min(int64(n), m.reserved-m.used)), nil
}

func (m *meter) add(n int) {
	m.mu.Lock()
	m.used += int64(n)
	m.mu.Unlock()
}

// settle charges what was used: each chunk whole but the last, which is
// charged what was used of it.
func (m *meter) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	left := m.used
	for i, r := range m.held {
		cost := min(left, m.bounds[i])
		if i == len(m.held)-1 {
			cost = left
		}
		m.l.Settle(r, cost)
		left -= cost
	}
	m.held, m.bounds = nil, nil
}

// refusal says why a budget refused: the limit, what was used, when it
// starts over.
func (m *meter) refusal(agent, ruleKey string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	reset := "never starts over"
	if !m.adm.Reset.IsZero() {
		reset = "starts over at " + m.adm.Reset.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("agent %s has used %d of the %d bytes its budget under rule %s allows (%s)", agent, m.adm.Used, m.adm.Limit, ruleKey, reset)
}

// limitedBody is a body read within a size bound and a budget: past the
// bound it fails with tooLarge; with the budget spent, with errBudget.
type limitedBody struct {
	io.ReadCloser
	max      int64 // 0: no bound
	n        int64
	tooLarge error
	m        *meter // nil: no budget
	onCut    func(error)
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.max > 0 {
		if b.n >= b.max {
			// One byte more tells a body at its bound from one past it.
			var one [1]byte
			if k, _ := b.ReadCloser.Read(one[:]); k > 0 {
				b.onCut(b.tooLarge)
				return 0, b.tooLarge
			}
			return 0, io.EOF
		}
		p = p[:min(int64(len(p)), b.max-b.n)]
	}
	if b.m != nil && len(p) > 0 {
		room, err := b.m.room(len(p))
		if err != nil {
			b.onCut(err)
			return 0, err
		}
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if b.m != nil {
		b.m.add(n)
	}
	return n, err
}

// retryAfter is a delay as a Retry-After header gives it: whole seconds,
// at least one.
func retryAfter(d time.Duration) string {
	return fmt.Sprint(max(1, int64(math.Ceil(d.Seconds()))))
}
