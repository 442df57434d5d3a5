package audit

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// A message that finds the writer's queue full is not lost unseen: the next
// batch carries an entry saying how many went.
func TestAWriterThatFallsBehindSaysHowManyItLost(t *testing.T) {
	w := &Writer{in: make(chan queued), cfg: Config{Now: time.Now}, log: slog.New(slog.DiscardHandler)}
	for range 3 {
		w.take(&nats.Msg{Subject: "task.result.agent-1", Data: []byte(`{}`)}) // no one reads: the queue is full
	}
	out := w.withMissed(nil)
	if len(out) != 1 || out[0].Kind != protocol.AuditMissed || out[0].Outcome != "3 entries lost" || out[0].Time.IsZero() {
		t.Fatalf("after 3 missed: %+v", out)
	}
	if out := w.withMissed(nil); len(out) != 0 {
		t.Fatalf("the count was not reset: %+v", out)
	}
}
