// Package pace is waiting in step with a context: a sleep that the context
// cuts short, and a call repeated each period until the context ends.
package pace

import (
	"context"
	"time"
)

// Sleep waits d, or less if ctx ends first; it says whether it slept the
// whole of d (false: ctx ended).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Every calls fn each period, the first time one period from now, until ctx
// ends or fn returns false.
func Every(ctx context.Context, period time.Duration, fn func() (again bool)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !fn() {
				return
			}
		}
	}
}
