package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// BenchmarkMailDelivery: what mail that waits costs a message to a running
// agent, against the live path it replaced, in the same run on the same bus
// and agent. Mailbox: mailbox.Send until the agent's "delivered" receipt
// (the bus stores the message, the agent pulls it, stores its file synced,
// acknowledges it and answers). Live: a core request the agent answers once
// it stored the file synced (a broadcast to the one running agent: the path
// every inbox message took before, and broadcasts still take). An op is
// one message of each.
func BenchmarkMailDelivery(b *testing.B) {
	f := bustest.Start(b, flockWith(1, nil))
	shared := b.TempDir()
	a, _ := f.Model.Agent("agent-1")
	cfg := worker.Config{
		ID: "agent-1", URL: f.URL, SharedDir: shared, NkeyFile: f.SeedFile(b, "agent-1"),
		Heartbeat: time.Second, TaskTimeout: a.Limits.TaskTimeout, Concurrency: a.Limits.Concurrency,
		LogFile: "-", LogLevel: "error", Grace: 5 * time.Second, StatusFile: filepath.Join(shared, "run", "agent-1.status"),
		InboxRate: 1 << 20, InboxBytesRate: 1 << 40, // the rates are not what is measured
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, cfg, nil) }()
	defer func() { cancel(); <-done }()
	op := f.Connect(b, protocol.OperatorUser)
	send := func(i int) (protocol.Receipt, error) {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		return mailbox.Send(sctx, op, protocol.OperatorUser, "agent-1", protocol.Message{ID: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), Body: "a message of a few words"}, 5*time.Second)
	}
	for start := time.Now(); ; { // the agent is up once a message is delivered
		if r, err := send(-1); err == nil && r.Status == protocol.ReceiptDelivered {
			break
		}
		if time.Since(start) > 20*time.Second {
			b.Fatal("the agent took no mail within 20 s")
		}
	}
	body, _ := json.Marshal(protocol.Message{V: protocol.Version, Body: "a message of a few words"})
	var mail, live []time.Duration
	i := 0
	for b.Loop() {
		i++
		t0 := time.Now()
		r, err := send(i)
		if err != nil || r.Status != protocol.ReceiptDelivered {
			b.Fatalf("message %d: %+v %v", i, r, err)
		}
		mail = append(mail, time.Since(t0))
		t0 = time.Now()
		m, err := op.Request(protocol.SubjectBroadcast, body, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		var rc protocol.Receipt
		if json.Unmarshal(m.Data, &rc) != nil || rc.File == "" {
			b.Fatalf("live receipt %s", m.Data)
		}
		live = append(live, time.Since(t0))
	}
	q := func(d []time.Duration, p float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(q(mail, 0.5)), "mailbox-p50-µs")
	b.ReportMetric(us(q(mail, 0.99)), "mailbox-p99-µs")
	b.ReportMetric(us(q(live, 0.5)), "live-p50-µs")
	b.ReportMetric(us(q(live, 0.99)), "live-p99-µs")
	b.ReportMetric(float64(q(mail, 0.5))/float64(q(live, 0.5)), "mailbox/live")
}
