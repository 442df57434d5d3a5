package services

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// tap is one subscription per subject for every service in the process
// that listens to it: the exporter and the audit writer both hear results
// and usage, and a second subscription on one connection would have the
// bus send each message twice (a copy, and its write, per subscription).
//
// What the bus client holds for the listeners, messages not yet handed to
// them, is bounded for the process as a whole, not per subscription (there
// is one per agent's inbox too): a subscription of every agent's messages
// (results, say) holds up to widePendingBytes (what one agent may send the
// bus at once, as the services may be throttled meanwhile), and the
// agents' inboxes
// share what is left of pendingBudget, each at least
// minPendingBytes. Past its part a subscription drops messages (a slow
// consumer), which the audit writer counts as missed (Listen).
type tap struct {
	nc *nats.Conn
	mu sync.Mutex
	by map[string]*tapped
}

type tapped struct {
	sub      *nats.Subscription
	handlers atomic.Pointer[[]*nats.MsgHandler]
}

// pendingBudget bounds what the subscriptions of the tap hold together
// (but for minPendingBytes each of so many agents' that it is not
// enough); pendingMsgBytes is the size a message counts as for the bound
// on their number (a message's own overhead, for small ones).
const (
	pendingBudget    = 48 << 20
	widePendingBytes = 4 << 20 // a peer's burst at the bus (flock.Bus.PeerBurstBytes)
	minPendingBytes  = 64 << 10
	pendingMsgBytes  = 256
)

func newTap(nc *nats.Conn) *tap { return &tap{nc: nc, by: map[string]*tapped{}} }

// Subscribe adds h to subject's listeners; the returned func removes it
// (the subscription goes with the last).
func (t *tap) Subscribe(subject string, h nats.MsgHandler) (func(), error) {
	stop, _, err := t.Listen(subject, h)
	return stop, err
}

// Listen is Subscribe, and a count of the messages the subscription's
// pending limits dropped so far (shared by its listeners).
func (t *tap) Listen(subject string, h nats.MsgHandler) (stop func(), dropped func() int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp := t.by[subject]
	if tp == nil {
		tp = &tapped{}
		tp.handlers.Store(&[]*nats.MsgHandler{})
		sub, err := t.nc.Subscribe(subject, func(m *nats.Msg) {
			for _, h := range *tp.handlers.Load() {
				(*h)(m)
			}
		})
		if err != nil {
			return nil, nil, fmt.Errorf("subscribe %s: %w", subject, err)
		}
		tp.sub = sub
		t.by[subject] = tp
		t.limit()
	}
	hp := &h
	hs := append(append([]*nats.MsgHandler(nil), *tp.handlers.Load()...), hp)
	tp.handlers.Store(&hs)
	sub := tp.sub
	return func() { t.remove(subject, hp) }, func() int { n, _ := sub.Dropped(); return n }, nil
}

// limit splits the pending budget over the subscriptions (t.mu held).
func (t *tap) limit() {
	wide := 0
	for subject := range t.by {
		if isWide(subject) {
			wide++
		}
	}
	narrow := max(minPendingBytes, (pendingBudget-wide*widePendingBytes)/max(len(t.by)-wide, 1))
	for subject, tp := range t.by {
		bytes := narrow
		if isWide(subject) {
			bytes = widePendingBytes
		}
		_ = tp.sub.SetPendingLimits(bytes/pendingMsgBytes, bytes)
	}
}

// isWide reports whether subject carries every agent's messages, not one
// agent's inbox (agent.<id>.inbox.*).
func isWide(subject string) bool {
	t := strings.Split(subject, ".")
	return !(len(t) == 4 && t[0] == "agent" && t[1] != "*" && t[2] == "inbox")
}

func (t *tap) remove(subject string, hp *nats.MsgHandler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp := t.by[subject]
	if tp == nil {
		return
	}
	var hs []*nats.MsgHandler
	for _, h := range *tp.handlers.Load() {
		if h != hp {
			hs = append(hs, h)
		}
	}
	tp.handlers.Store(&hs)
	if len(hs) == 0 {
		_ = tp.sub.Unsubscribe()
		delete(t.by, subject)
		t.limit()
	}
}
