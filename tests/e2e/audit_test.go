package e2e

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// The audit trail the services write in their container: a task sent to
// agent-1 and agent-1's answer, taken from the bus, and the trail whole.
func TestTheAuditTrailRecordsTheFlock(t *testing.T) {
	cl := operatorClient(t)
	ctx := testContext(t, 60*time.Second)
	id := taskID(t, "audit")
	if _, err := cl.Run(ctx, operator.Target{Agent: "agent-1"}, taskExec(id, "exit", "0"), nil); err != nil {
		t.Fatalf("the task: %v", err)
	}
	var sent, answered bool
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !(sent && answered); time.Sleep(500 * time.Millisecond) {
		sent, answered = false, false
		err := audit.Each(ctx, cl.JetStream(), audit.Filter{Agent: "agent-1"}, func(_ uint64, _ []byte, e protocol.AuditEntry) error {
			if e.What != id {
				return nil
			}
			sent = sent || (e.Kind == protocol.AuditTaskSent && e.Who == protocol.OperatorUser && e.Agent == "agent-1")
			answered = answered || (e.Kind == protocol.AuditTaskResult && e.Who == "agent-1" && e.Outcome == protocol.StatusOK)
			return nil
		})
		if err != nil {
			t.Fatalf("read the trail: %v", err)
		}
	}
	if !sent || !answered {
		t.Fatalf("the trail holds the task sent: %v, answered by agent-1: %v", sent, answered)
	}
	r, err := audit.Verify(ctx, cl.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("the trail is not whole: %q", r.Problems)
	}
	t.Logf("%d entries, %d to %d, anchors %d", r.Entries, r.First, r.Last, len(r.Anchors))
}
