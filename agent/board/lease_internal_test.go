package board

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

type fakeLink struct {
	up         bool
	reconnects uint64
}

func (l *fakeLink) IsConnected() bool { return l.up }
func (l *fakeLink) Stats() nats.Statistics {
	return nats.Statistics{Reconnects: l.reconnects}
}

// After the service starts, and after each time its link to the bus comes
// back, no lease expires for a lease: the holders could not renew while it
// was away. While the link is down nothing expires.
func TestNoLeaseExpiresForALeaseAfterAReconnect(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	lease := 30 * time.Second
	l := &fakeLink{up: true}
	var q quietWindow
	steps := []struct {
		at    time.Duration
		set   func()
		allow bool
	}{
		{0, nil, false}, // the start
		{29 * time.Second, nil, false},
		{30 * time.Second, nil, true},
		{40 * time.Second, func() { l.up = false }, false}, // the bus is away
		{90 * time.Second, nil, false},
		{95 * time.Second, func() { l.up, l.reconnects = true, 1 }, false}, // back
		{124 * time.Second, nil, false},
		{125 * time.Second, nil, true},
		// A reconnect between two sweeps, never seen down: the count says so.
		{130 * time.Second, func() { l.reconnects = 2 }, false},
		{160 * time.Second, nil, true},
	}
	for _, s := range steps {
		if s.set != nil {
			s.set()
		}
		if got := q.allows(t0.Add(s.at), l, lease); got != s.allow {
			t.Fatalf("at %s (link up %v, reconnects %d): expiries allowed %v, want %v", s.at, l.up, l.reconnects, got, s.allow)
		}
	}
}
