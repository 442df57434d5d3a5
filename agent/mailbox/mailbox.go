// Package mailbox sends inbox messages the way every sender must: on
// agent.<to>.inbox.<from> (the bus lets a user publish there only as itself),
// into the receiving agent's mailbox, a stream that keeps the message until
// the agent takes it. The sender hears two things: that the bus queued the
// message (the stream stored it, replicated like the rest), and, if the agent
// takes it within the wait, that it was delivered (the file the agent stored
// it in). A message is never lost in silence: it is queued, or the sender
// hears why not. The operator client, an agent's MCP server and the CLI all
// send through it.
package mailbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

var (
	// ErrNoMailbox: the bus keeps no mailbox for that name (no such agent).
	ErrNoMailbox = errors.New("no such agent")
	// ErrRefused: the mailbox refused the message (full, or too large).
	ErrRefused = errors.New("the mailbox refused the message")
	// ErrNotStored: the receiving agent took the message and could not store it.
	ErrNotStored = errors.New("the receiving agent did not store the message")
	// ErrDuplicate: the mailbox already held a message of this sender with
	// this ID (sent within its de-duplication window) and dropped this one.
	ErrDuplicate = errors.New("duplicate")
)

// NewID returns a random message ID (protocol.ValidTaskID).
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "m-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// Send puts msg in agent to's mailbox as from, then waits up to wait (and
// ctx) for the agent to take it. The receipt's Status is
// protocol.ReceiptDelivered (File: where the agent stored it) or
// protocol.ReceiptQueued (the bus keeps it; the agent takes it when it
// runs). An error means the message is not queued: no such agent, refused
// (full, too large), a duplicate (ErrDuplicate, Status
// protocol.ReceiptDuplicate: the mailbox stored a message of this sender
// with this ID within its window and dropped this one, which is never
// "queued"), or ctx ended before the bus answered (then sending the same
// message again within two minutes stores it once: the bus drops a
// repeated ID of the same sender). The message's ID, version and time are
// filled in when empty; From is always from (the receiver ignores the
// body's claim).
func Send(ctx context.Context, nc *nats.Conn, from, to string, msg protocol.Message, wait time.Duration) (protocol.Receipt, error) {
	if msg.ID == "" {
		msg.ID = NewID()
	}
	if !protocol.ValidTaskID(msg.ID) {
		return protocol.Receipt{}, fmt.Errorf("message id %q: 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", msg.ID)
	}
	if _, err := protocol.ParseAgentID(to); err != nil {
		return protocol.Receipt{}, fmt.Errorf("to: %w", err)
	}
	if msg.V == 0 {
		msg.V = protocol.Version
	}
	if msg.Time.IsZero() {
		msg.Time = time.Now().UTC()
	}
	msg.From = from
	b, err := protocol.Encode(msg, false)
	if err != nil {
		return protocol.Receipt{}, err
	}
	if len(b) > protocol.MailMessageBytes {
		return protocol.Receipt{}, fmt.Errorf("%w: the message is %d bytes as JSON, over the mailbox's limit of %d", ErrRefused, len(b), protocol.MailMessageBytes)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return protocol.Receipt{}, err
	}
	// Subscribe before publishing: a running agent may answer at once.
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return protocol.Receipt{}, fmt.Errorf("message %s to %s: %w", msg.ID, to, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	m := nats.NewMsg(protocol.MailSubject(to, from))
	m.Data = b
	m.Header.Set(protocol.HeaderReceipt, inbox)
	ack, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(protocol.MailMsgID(from, msg.ID)))
	if err != nil {
		return protocol.Receipt{}, publishError(err, from, to, msg.ID)
	}
	r := protocol.Receipt{V: protocol.Version, ID: msg.ID, To: to, From: from, Status: protocol.ReceiptQueued, Seq: ack.Sequence}
	if ack.Duplicate {
		// Not this message: the one stored before under this ID (ack.Sequence).
		r.Status = protocol.ReceiptDuplicate
		return r, fmt.Errorf("%w: %s's mailbox already took a message %s from %s within the last %s (mailbox seq %d) and dropped this one: give a new message its own id",
			ErrDuplicate, to, msg.ID, from, protocol.MailDuplicateWindow, ack.Sequence)
	}
	if wait <= 0 {
		return r, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		rm, err := sub.NextMsgWithContext(wctx)
		if err != nil {
			return r, nil // still queued: the agent takes it when it can
		}
		var d protocol.Receipt
		if json.Unmarshal(rm.Data, &d) != nil || d.ID != msg.ID || d.To != to {
			continue // not this message's receipt
		}
		d.Seq = ack.Sequence
		if d.Error != "" {
			return d, fmt.Errorf("%w: %s: %s", ErrNotStored, to, d.Error)
		}
		return d, nil
	}
}

// publishError names why the bus did not queue a message.
func publishError(err error, from, to, id string) error {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: the bus keeps no mailbox for %q", ErrNoMailbox, to)
	case errors.As(err, &api):
		d := api.Description
		switch {
		case from == protocol.OperatorUser && (strings.Contains(d, "maximum messages") || strings.Contains(d, "maximum bytes") || strings.Contains(d, "per subject")):
			return fmt.Errorf("%w: the operator's own share of %s's mailbox is full (%d messages waiting, which no agent's mail counts against): send again once %s has taken some",
				ErrRefused, to, protocol.MailPerSender, to)
		case strings.Contains(d, "per subject"):
			return fmt.Errorf("%w: %s already has %d messages from %s waiting in its mailbox (the share of one sender; a sender's messages also wait there while %s holds %d of its messages it has not taken): send again once it has taken some",
				ErrRefused, to, protocol.MailPerSender, from, to, protocol.InboxPerSender)
		case strings.Contains(d, "maximum messages") || strings.Contains(d, "maximum bytes"):
			return fmt.Errorf("%w: %s's mailbox is full (%d messages or %d KiB waiting)", ErrRefused, to, protocol.MailMessages, protocol.SharedMailBytes>>10)
		case strings.Contains(d, "size"):
			return fmt.Errorf("%w: the message is over the mailbox's limit of %d bytes", ErrRefused, protocol.MailMessageBytes)
		}
		return fmt.Errorf("%w: %s", ErrRefused, d)
	}
	return fmt.Errorf("message %s to %s: not queued (sending it again stores it once): %w", id, to, err)
}
