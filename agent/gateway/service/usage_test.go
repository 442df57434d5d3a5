package service

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
)

// The queue to the bus is bounded: past it a report is dropped and counted,
// never waited for.
func TestUsageQueueDropsWhenFull(t *testing.T) {
	var logs syncbuf.Buffer
	p := &publisher{queue: make(chan protocol.Usage, 2), log: slog.New(slog.NewJSONHandler(&logs, nil))}
	done := make(chan struct{})
	go func() {
		for range 5 {
			p.offer(gateway.Usage{Agent: "agent-1"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("offer blocked on a full queue")
	}
	if n := p.dropped.Load(); n != 3 {
		t.Errorf("dropped %d, want 3", n)
	}
	p.reportDrops()
	if !strings.Contains(logs.String(), `"count":3`) || p.dropped.Load() != 0 {
		t.Errorf("drops not reported once: %s", logs.String())
	}
}
