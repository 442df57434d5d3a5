package mailbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A message the mailbox drops as a duplicate of one it stored (same sender,
// same ID, within its window) is reported as one, never as queued; the same
// ID from another sender is that sender's own message and is stored.
func TestSendReportsADuplicate(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	op, a1 := f.Connect(t, protocol.OperatorUser), f.Connect(t, "agent-1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := protocol.Message{ID: "m-1", Body: "first"}
	r, err := mailbox.Send(ctx, op, protocol.OperatorUser, "agent-2", msg, 0)
	if err != nil || r.Status != protocol.ReceiptQueued {
		t.Fatalf("first: %+v %v", r, err)
	}
	msg.Body = "again"
	again, err := mailbox.Send(ctx, op, protocol.OperatorUser, "agent-2", msg, 0)
	if !errors.Is(err, mailbox.ErrDuplicate) || again.Status != protocol.ReceiptDuplicate || again.Seq != r.Seq ||
		!strings.Contains(err.Error(), "already took a message m-1 from operator") {
		t.Fatalf("the same ID again: %+v %v; want a duplicate of seq %d", again, err, r.Seq)
	}
	if other, err := mailbox.Send(ctx, a1, "agent-1", "agent-2", msg, 0); err != nil || other.Status != protocol.ReceiptQueued || other.Seq == r.Seq {
		t.Fatalf("agent-1 with the operator's ID: %+v %v; want its own message queued", other, err)
	}
}
