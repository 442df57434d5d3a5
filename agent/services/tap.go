package services

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// tap is one subscription per subject for every service in the process
// that listens to it: the exporter and the audit writer both hear results
// and usage, and a second subscription on one connection would have the
// bus send each message twice (a copy, and its write, per subscription).
type tap struct {
	nc *nats.Conn
	mu sync.Mutex
	by map[string]*tapped
}

type tapped struct {
	sub      *nats.Subscription
	handlers atomic.Pointer[[]*nats.MsgHandler]
}

func newTap(nc *nats.Conn) *tap { return &tap{nc: nc, by: map[string]*tapped{}} }

// Subscribe adds h to subject's listeners; the returned func removes it
// (the subscription goes with the last).
func (t *tap) Subscribe(subject string, h nats.MsgHandler) (func(), error) {
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
			return nil, fmt.Errorf("subscribe %s: %w", subject, err)
		}
		// A slow listener must not cost a heartbeat: room for a burst.
		_ = sub.SetPendingLimits(1<<16, 64<<20)
		tp.sub = sub
		t.by[subject] = tp
	}
	hp := &h
	hs := append(append([]*nats.MsgHandler(nil), *tp.handlers.Load()...), hp)
	tp.handlers.Store(&hs)
	return func() { t.remove(subject, hp) }, nil
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
	}
}
