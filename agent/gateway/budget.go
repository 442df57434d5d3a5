package gateway

import "sync"

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

// of is how many of agent's requests are in flight.
func (f *inFlight) of(agent string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[agent]
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
