package audit

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Shares: no sender can fill the trail, or its part of it, for the others.
// Each sender (an agent, the services for an agent, the operator: derive's
// senders) has a share of the trail's bytes per retention period, kept as a
// token bucket: it holds the share, fills again at the share per retention
// period, and each entry takes its bytes from it. An entry its sender has
// no room for is counted and not recorded (an audit.overshare entry says
// how many). Since a bucket holds a share and fills by one more over a
// retention period, a sender has at most twice its share in the trail; the
// shares are sized so that twice them all fits in seven eighths of the
// trail, the last eighth left for the writer's own entries (its starts and
// what it could not record), which no share bounds.
//
// Of that: the agents' own entries (their results and mail) half, split
// evenly; the services' entries for an agent (its gateway calls, its board
// changes, the pool tasks given to it) a quarter, split evenly; the
// operator's (its tasks, broadcasts, mail and requests) a quarter.
type shareSizes struct {
	agent, forAgent, operator int64
	per                       time.Duration // the retention: a share fills again over it
}

// sizeShares sizes the shares of a trail of trail bytes kept retention,
// for a flock of agents.
func sizeShares(trail int64, retention time.Duration, agents int) shareSizes {
	agents = max(agents, 1)
	held := trail * 7 / 8 / 2 // what the shares hold at once: twice that is in the trail at most
	return shareSizes{agent: held / 2 / int64(agents), forAgent: held / 4 / int64(agents), operator: held / 4, per: retention}
}

// of is sender's share.
func (z shareSizes) of(sender string) int64 {
	switch {
	case sender == protocol.OperatorUser:
		return z.operator
	case strings.HasPrefix(sender, servicesFor):
		return z.forAgent
	}
	return z.agent
}

// shareName is how an entry names a sender's share.
func shareName(sender string) string {
	if id, ok := strings.CutPrefix(sender, servicesFor); ok {
		return "the services for " + id
	}
	return sender
}

// shareAgent is the agent a share is of ("operator" for the operator's).
func shareAgent(sender string) string { return strings.TrimPrefix(sender, servicesFor) }

// overShareOutcome says what an audit.overshare entry counts.
func (z shareSizes) overShareOutcome(sender string, n int64) string {
	return fmt.Sprintf("%s: %s entries not recorded: over its share of %s bytes per %s", shareName(sender), thousands(n), thousands(z.of(sender)), z.per)
}

type bucket struct {
	left float64 // bytes
	at   time.Time
}

// shares holds every sender's bucket.
type shares struct {
	mu    sync.Mutex
	sizes shareSizes
	by    map[string]*bucket
}

func newShares(z shareSizes) *shares { return &shares{sizes: z, by: map[string]*bucket{}} }

// take charges n bytes to sender's share at now, or reports that it has
// not that much left (and charges nothing).
func (s *shares) take(sender string, n int, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(sender, now)
	if b.left < float64(n) {
		return false
	}
	b.left -= float64(n)
	return true
}

// refund gives n bytes back to sender's share: an entry taken from it
// that the writer could not queue (counted as missed, not over its share).
func (s *shares) refund(sender string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.by[sender]; b != nil {
		b.left = min(b.left+float64(n), float64(s.sizes.of(sender)))
	}
}

// bucket is sender's bucket, filled up to now.
func (s *shares) bucket(sender string, now time.Time) *bucket {
	c := float64(s.sizes.of(sender))
	b := s.by[sender]
	if b == nil {
		b = &bucket{left: c, at: now}
		s.by[sender] = b
	}
	if now.After(b.at) {
		b.left += c * float64(now.Sub(b.at)) / float64(s.sizes.per)
		b.at = now
	}
	b.left = min(b.left, c)
	return b
}

// resize applies new sizes (the flock's agents changed): what a sender
// has left stays, up to its new share.
func (s *shares) resize(z shareSizes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes = z
}

func (s *shares) size() shareSizes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sizes
}

// state is what the senders whose buckets are not full have left at now,
// to carry it across the writer's restarts.
func (s *shares) state(now time.Time) protocol.AuditShares {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := protocol.AuditShares{Time: now.UTC(), Left: map[string]int64{}}
	for sender := range s.by {
		b := s.bucket(sender, now)
		if left := int64(b.left); left < s.sizes.of(sender) {
			st.Left[sender] = left
		} else {
			delete(s.by, sender) // full: as good as none
		}
	}
	return st
}

// restore takes the state a writer before left, filled up to now.
func (s *shares) restore(st protocol.AuditShares, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := st.Time
	if at.After(now) {
		at = now
	}
	for sender, left := range st.Left {
		s.by[sender] = &bucket{left: float64(max(left, 0)), at: at}
		s.bucket(sender, now)
	}
}

// thousands writes n with commas: 6,812.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
