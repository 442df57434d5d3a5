package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds and fails t, naming what it waited for,
// if it does not within the given time.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitEvery is WaitFor polling at the given interval: for a condition that
// costs a request to the engine or a read of many files, where WaitFor's
// 10 ms would be a busy loop.
func WaitEvery(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(every)
	}
}
