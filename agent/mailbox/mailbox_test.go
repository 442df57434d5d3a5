package mailbox_test

import (
	"context"
	"errors"
	"fmt"
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
	if other, err := mailbox.Send(ctx, a1, "agent-1", "agent-2", msg, 0); err != nil || other.Status != protocol.ReceiptQueued {
		t.Fatalf("agent-1 with the operator's ID: %+v %v; want its own message queued", other, err)
	}
}

// The operator's mail has a share of each mailbox that no number of agents
// can take: five agents fill agent-6's mailbox to its byte bound (each
// within its own share), after which a sixth sender is refused, and the
// operator still queues its share of the largest messages; past that share
// it is refused by name, and no agent may publish on the operator's subject.
func TestTheOperatorsShareHoldsAgainstManySenders(t *testing.T) {
	t.Parallel()
	const to = "agent-7"
	f := bustest.Start(t, bustest.Agents(7))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	large := func(i int) protocol.Message {
		m := protocol.Message{ID: fmt.Sprintf("m-%d", i), Body: strings.Repeat("x", protocol.MailMessageBytes-512)}
		return m
	}
	full := false
	for a := 1; a <= 5 && !full; a++ {
		from := fmt.Sprintf("agent-%d", a)
		nc := f.Connect(t, from)
		for i := range protocol.MailPerSender {
			_, err := mailbox.Send(ctx, nc, from, to, large(i), 0)
			if err != nil {
				if !errors.Is(err, mailbox.ErrRefused) || !strings.Contains(err.Error(), "mailbox is full") {
					t.Fatalf("%s's message %d: %v; want queued or the mailbox full", from, i, err)
				}
				full = true
				break
			}
		}
	}
	if !full {
		t.Fatalf("five senders' shares did not fill %s's mailbox: the test no longer floods it", to)
	}
	a6 := f.Connect(t, "agent-6")
	if _, err := mailbox.Send(ctx, a6, "agent-6", to, large(0), 0); !errors.Is(err, mailbox.ErrRefused) {
		t.Fatalf("agent-6 into the full mailbox: %v; want refused", err)
	}
	op := f.Connect(t, protocol.OperatorUser)
	for i := range protocol.MailPerSender {
		r, err := mailbox.Send(ctx, op, protocol.OperatorUser, to, large(i), 0)
		if err != nil || r.Status != protocol.ReceiptQueued {
			t.Fatalf("the operator's message %d into a mailbox the agents filled: %+v %v; want queued", i, r, err)
		}
	}
	_, err := mailbox.Send(ctx, op, protocol.OperatorUser, to, protocol.Message{Body: "one more"}, 0)
	if !errors.Is(err, mailbox.ErrRefused) || !strings.Contains(err.Error(), "the operator's own share of "+to+"'s mailbox is full") {
		t.Fatalf("the operator past its share: %v", err)
	}
	// An agent publishing on the operator's subject is refused by the bus
	// (a permissions violation), so it cannot take the operator's share.
	a1 := f.ConnectRecorded(t, "agent-1")
	if err := a1.Publish(protocol.OperatorInboxSubject(to), []byte(`{"id":"forged"}`)); err != nil {
		t.Fatal(err)
	}
	a1.Denied(t, "publish", protocol.OperatorInboxSubject(to))
}
