package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/roster"
	"github.com/ai-flock/ai-flock/protocol"
)

// Send puts msg in agent to's mailbox as the operator and waits up to wait
// (and ctx) for the agent to take it: the receipt says queued (the bus keeps
// it until the agent runs) or delivered (the file the agent stored it in).
func (c *Client) Send(ctx context.Context, to string, msg protocol.Message, wait time.Duration) (protocol.Receipt, error) {
	r, err := mailbox.Send(ctx, c.nc, protocol.OperatorUser, to, msg, wait)
	if errors.Is(err, context.DeadlineExceeded) {
		return r, fmt.Errorf("%w for the bus to queue the message to %s (sending it again stores it once)", ErrTimeout, to)
	}
	return r, err
}

// Broadcast sends msg to every agent (they record the operator as its
// sender) and gathers their receipts until every agent of the roster has
// answered or ctx ends. It returns the receipts, stored or refused, and the
// agents that did not answer.
func (c *Client) Broadcast(ctx context.Context, msg protocol.Message) ([]protocol.Receipt, []string, error) {
	if msg.ID == "" {
		msg.ID = mailbox.NewID()
	}
	if msg.V == 0 {
		msg.V = protocol.Version
	}
	if msg.Time.IsZero() {
		msg.Time = time.Now().UTC()
	}
	msg.From = protocol.OperatorUser
	b, err := protocol.Encode(msg, false)
	if err != nil {
		return nil, nil, err
	}
	roster, err := c.Roster(ctx)
	if err != nil {
		return nil, nil, err
	}
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil, err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(protocol.SubjectBroadcast, inbox, b); err != nil {
		return nil, nil, err
	}
	waiting := map[string]bool{}
	for _, id := range roster {
		waiting[id] = true
	}
	var receipts []protocol.Receipt
	for len(waiting) > 0 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // ctx ended: the rest did not answer
		}
		var r protocol.Receipt
		if json.Unmarshal(m.Data, &r) != nil || !waiting[r.To] {
			continue
		}
		delete(waiting, r.To)
		receipts = append(receipts, r)
	}
	missing := make([]string, 0, len(waiting))
	for id := range waiting {
		missing = append(missing, id)
	}
	sort.Strings(missing)
	return receipts, missing, nil
}

// Roster asks the bus for the flock's agent IDs.
func (c *Client) Roster(ctx context.Context) ([]string, error) {
	r, err := roster.Ask(ctx, c.nc)
	if err != nil {
		return nil, err
	}
	return r.IDs(), nil
}
