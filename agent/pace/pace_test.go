package pace

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a whole sleep said it was cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Error("a sleep cut short by its context said it was whole")
	}
	if time.Since(start) > time.Second {
		t.Error("an ended context did not cut the sleep short")
	}
}

func TestEvery(t *testing.T) {
	calls := 0
	start := time.Now()
	Every(context.Background(), 5*time.Millisecond, func() bool { calls++; return calls < 3 })
	if calls != 3 {
		t.Errorf("fn called %d times after it asked to stop at the third", calls)
	}
	if time.Since(start) < 15*time.Millisecond {
		t.Errorf("three periods of 5 ms took %v", time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	Every(ctx, time.Hour, func() bool { t.Error("called before its first period"); return true })
}
