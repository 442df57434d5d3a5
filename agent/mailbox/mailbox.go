// Package mailbox sends inbox messages the way every sender must: on
// agent.<to>.inbox.<from> (the bus lets a user publish there only as itself),
// as a request the receiving agent answers with a receipt once the message is
// stored, or with an error. An agent stores only messages that ask for a
// receipt, so no message is ever lost in silence: it is stored and
// confirmed, or the sender hears why not (or that nobody answered). The operator client and an agent's MCP
// server both send through it.
package mailbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

var (
	// ErrNotConnected: no agent is subscribed to that inbox (unknown, or not running).
	ErrNotConnected = errors.New("no agent took the message")
	// ErrNotStored: the receiving agent could not store the message.
	ErrNotStored = errors.New("the receiving agent did not store the message")
)

// NewID returns a random message ID (protocol.ValidTaskID).
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "m-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// Send puts msg in agent to's inbox as from and returns the receiving agent's
// receipt (the file it stored the message in), or an error: not connected,
// refused (the receipt says why), or ctx's end. The message's ID, version
// and time are filled in when empty; From is always from (the receiver
// ignores the body's claim).
func Send(ctx context.Context, nc *nats.Conn, from, to string, msg protocol.Message) (protocol.Receipt, error) {
	if msg.ID == "" {
		msg.ID = NewID()
	}
	if !protocol.ValidTaskID(msg.ID) {
		return protocol.Receipt{}, fmt.Errorf("message id %q: 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", msg.ID)
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
	subject := protocol.InboxSubject(to, from)
	m, err := nc.RequestWithContext(ctx, subject, b)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return protocol.Receipt{}, fmt.Errorf("%w: %s is not connected to the bus (or no such agent)", ErrNotConnected, to)
	case err != nil:
		return protocol.Receipt{}, fmt.Errorf("message %s to %s: %w", msg.ID, to, err)
	}
	var r protocol.Receipt
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return protocol.Receipt{}, fmt.Errorf("message %s to %s: unreadable receipt: %w", msg.ID, to, err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("%w: %s: %s", ErrNotStored, to, r.Error)
	}
	return r, nil
}
