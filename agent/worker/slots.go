package worker

import (
	"context"
	"sync"
	"time"
)

// slots bounds the tasks an agent runs at once (CONCURRENCY) across its two
// consumers, and keeps the shared pool fair:
//
//   - the agent's own consumer has MaxAckPending = CONCURRENCY on the server,
//     so it never holds more own tasks than it could run;
//   - pool tasks are fetched only for slots that are free at that moment
//     (a pool fetch reserves them), so a busy agent never sits on a pool task
//     another agent could run now;
//   - an own task that finds no free slot while a pool fetch is only waiting
//     (reserved but unused slots) preempts that fetch: it is cancelled, its
//     unused slots come back, and own tasks go first.
type slots struct {
	mu         sync.Mutex
	size       int
	free       int
	ownWaiting int
	poolHeld   int                // reserved by the outstanding pool fetch, not yet used
	poolCancel context.CancelFunc // cancels that fetch
	wake       chan struct{}      // closed (and replaced) whenever free grows or waiters change
}

func newSlots(n int) *slots {
	return &slots{size: n, free: n, wake: make(chan struct{})}
}

func (s *slots) broadcast() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// acquireOwn takes a slot for an own task, calling keepalive every period
// while it waits (so the task's ack deadline does not pass). It returns
// false if ctx ends first.
func (s *slots) acquireOwn(ctx context.Context, period time.Duration, keepalive func()) bool {
	var tick <-chan time.Time
	s.mu.Lock()
	for s.free == 0 {
		if s.poolHeld > 0 && s.poolCancel != nil {
			s.poolCancel()
			s.poolCancel = nil
		}
		if tick == nil && keepalive != nil && period > 0 {
			t := time.NewTicker(period)
			defer t.Stop()
			tick = t.C
		}
		s.ownWaiting++
		w := s.wake
		s.mu.Unlock()
		select {
		case <-w:
		case <-tick:
			keepalive()
		case <-ctx.Done():
			s.mu.Lock()
			s.ownWaiting--
			s.broadcast()
			s.mu.Unlock()
			return false
		}
		s.mu.Lock()
		s.ownWaiting--
	}
	s.free--
	s.mu.Unlock()
	return true
}

// reservePool waits until slots are free and no own task waits, then
// reserves all free slots for one pool fetch. fctx is cancelled if an own
// task preempts the fetch. It returns 0 if ctx ends first.
func (s *slots) reservePool(ctx context.Context) (n int, fctx context.Context) {
	if ctx.Err() != nil {
		return 0, nil
	}
	s.mu.Lock()
	for s.free == 0 || s.ownWaiting > 0 {
		w := s.wake
		s.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return 0, nil
		}
		s.mu.Lock()
	}
	n = s.free
	s.free, s.poolHeld = 0, n
	fctx, s.poolCancel = context.WithCancel(ctx)
	s.mu.Unlock()
	return n, fctx
}

// usePool turns one reserved slot into a running task's slot.
func (s *slots) usePool() {
	s.mu.Lock()
	if s.poolHeld > 0 {
		s.poolHeld--
	} else {
		// More messages than reserved cannot come from one fetch; if they
		// ever do, account for them so release stays balanced.
		s.free--
	}
	s.mu.Unlock()
}

// endPool returns the fetch's unused reservations.
func (s *slots) endPool() {
	s.mu.Lock()
	if s.poolCancel != nil {
		s.poolCancel()
		s.poolCancel = nil
	}
	s.free += s.poolHeld
	s.poolHeld = 0
	s.broadcast()
	s.mu.Unlock()
}

// release frees a running task's slot.
func (s *slots) release() {
	s.mu.Lock()
	s.free++
	s.broadcast()
	s.mu.Unlock()
}

// running is how many slots run tasks.
func (s *slots) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.free - s.poolHeld
}
