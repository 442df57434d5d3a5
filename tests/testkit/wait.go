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
