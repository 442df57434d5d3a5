package operator

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Item is one thing Watch saw.
type Item struct {
	Kind    string          // heartbeat, event, result, dead
	Subject string          // the NATS subject
	Agent   string          // from the subject (the server vouches for it)
	Data    json.RawMessage // the body
	Header  nats.Header     // dead letters carry the reason here
}

// Watch calls fn for every heartbeat, event, result and dead letter until ctx ends.
func (c *Client) Watch(ctx context.Context, fn func(Item)) error { return c.WatchReady(ctx, fn, nil) }

// WatchReady is Watch that calls ready (if set) once the bus has the
// subscriptions: nothing published after that is missed.
func (c *Client) WatchReady(ctx context.Context, fn func(Item), ready func()) error {
	ch := make(chan *nats.Msg, 4096)
	for _, s := range []string{protocol.SubjectHeartbeats, protocol.SubjectEvents, protocol.SubjectResults, protocol.SubjectDead} {
		sub, err := c.nc.ChanSubscribe(s, ch)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			fn(classify(m))
		}
	}
}

func classify(m *nats.Msg) Item {
	it := Item{Subject: m.Subject, Data: m.Data, Header: m.Header}
	parts := strings.Split(m.Subject, ".")
	switch {
	case strings.HasPrefix(m.Subject, "task.result."):
		it.Kind, it.Agent = "result", strings.TrimPrefix(m.Subject, "task.result.")
	case strings.HasPrefix(m.Subject, "deadletter."):
		it.Kind = "dead"
	case len(parts) == 3 && parts[2] == "heartbeat":
		it.Kind, it.Agent = "heartbeat", parts[1]
	case len(parts) == 3 && parts[2] == "events":
		it.Kind, it.Agent = "event", parts[1]
	}
	return it
}
