package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds and fails t, naming what it waited for,
// if it does not within the given time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitEvery(t, within, 10*time.Millisecond, what, cond)
}

// WaitEvery is WaitFor polling at the given interval: for a condition that
// costs a request to the engine or a read of many files, where WaitFor's
// 10 ms would be a busy loop.
func WaitEvery(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, every, cond) {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// Within polls cond every interval until it holds or the time is up, and
// says whether it held: for a caller that reports the failure itself.
func Within(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
