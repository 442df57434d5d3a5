package worker

import (
	"context"
	"sync"
	"time"
)

// slots bounds the tasks an agent runs at once (CONCURRENCY). Its one
// consumer (its own tasks, tasks.all and the pool tasks the bus gives it) has
// MaxAckPending = CONCURRENCY on the server, so it never holds more than it
// could run; slots is the runtime's side of the same count.
type slots struct {
	mu      sync.Mutex
	size    int
	free    int
	waiting int           // consumer tasks waiting in acquire
	wake    chan struct{} // closed (and replaced) whenever free grows
}

func newSlots(n int) *slots {
	return &slots{size: n, free: n, wake: make(chan struct{})}
}

// acquire takes a slot for a task, calling keepalive every period while it
// waits (so the task's ack deadline does not pass). It returns false if ctx
// ends first.
func (s *slots) acquire(ctx context.Context, period time.Duration, keepalive func()) bool {
	var tick <-chan time.Time
	s.mu.Lock()
	s.waiting++
	defer func() { s.mu.Lock(); s.waiting--; s.mu.Unlock() }()
	for s.free == 0 {
		if tick == nil && keepalive != nil && period > 0 {
			t := time.NewTicker(period)
			defer t.Stop()
			tick = t.C
		}
		w := s.wake
		s.mu.Unlock()
		select {
		case <-w:
		case <-tick:
			keepalive()
		case <-ctx.Done():
			return false
		}
		s.mu.Lock()
	}
	s.free--
	s.mu.Unlock()
	return true
}

// idle reports whether a slot is free and no task of the consumer waits for
// one: the board's tasks only fill slots the consumer's leave idle. When not,
// it returns the channel that is closed when a slot is freed next.
func (s *slots) idle() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && s.waiting == 0 {
		return true, nil
	}
	return false, s.wake
}

// tryAcquire takes a slot at once if the slots are idle.
func (s *slots) tryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && s.waiting == 0 {
		s.free--
		return true
	}
	return false
}

// release frees a running task's slot.
func (s *slots) release() {
	s.mu.Lock()
	s.free++
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// running is how many slots run tasks.
func (s *slots) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.free
}
