package testkit

import (
	"testing"
	"time"
)

func TestWithinPollsUntilTheConditionHolds(t *testing.T) {
	calls := 0
	if !Within(time.Second, time.Millisecond, func() bool { calls++; return calls == 3 }) {
		t.Fatal("a condition that holds on the third poll: Within said it never held")
	}
	if calls != 3 {
		t.Errorf("polled %d times, want 3 (it stops once the condition holds)", calls)
	}
}

func TestWithinGivesUpWhenTheTimeIsUp(t *testing.T) {
	start := time.Now()
	if Within(30*time.Millisecond, 5*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds: Within said it held")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("gave up after %s, before the 30ms it was given", d)
	}
}
