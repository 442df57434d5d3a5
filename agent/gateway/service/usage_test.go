package service

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
)

// The queue to the bus is bounded: past it a report is dropped and counted,
// never waited for.
func TestUsageQueueDropsWhenFull(t *testing.T) {
	var logs syncbuf.Buffer
	p := &publisher{queue: make(chan report, 2), log: slog.New(slog.NewJSONHandler(&logs, nil))}
	done := make(chan struct{})
	go func() {
		for range 3 {
			p.offer(gateway.Usage{Agent: "agent-1"})
		}
		for range 2 {
			p.offerEgress(broker.Connection{Agent: "agent-1"})
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

// An egress record on the bus: counts, the rule's key, statuses by code,
// refusals with their suggestion; no query string (the broker keeps none).
func TestEgressUseRecord(t *testing.T) {
	end := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	u := egressUse(broker.Connection{Agent: "agent-1", Host: "api.example.com:443", Rule: "*.example.com:443", Kind: protocol.EgressBrokered,
		Requests: 3, Refused: 1, Sent: 10, Received: 2048, Statuses: map[int]int64{200: 2}, Duration: 1500 * time.Millisecond,
		Refusals: []broker.Refusal{{Method: "POST", Path: "/v2/x", Why: "no rule"}}}, end)
	if u.V != 1 || u.Rule != "*.example.com:443" || u.Statuses["200"] != 2 || u.DurationMS != 1500 || len(u.Refusals) != 1 ||
		u.Refusals[0].Path != "/v2/x" || !u.Time.Equal(end) || u.Received != 2048 {
		t.Errorf("%+v", u)
	}
}
