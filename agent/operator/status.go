package operator

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/roster"
	"github.com/ai-flock/ai-flock/protocol"
)

// AgentStatus is one line of `agents`.
type AgentStatus struct {
	ID         string              `json:"id"`
	InTopology bool                `json:"in_topology"` // the bus has its task consumer
	Pending    uint64              `json:"pending"`     // tasks waiting for it
	Running    int                 `json:"running"`     // tasks delivered and not yet acked
	Waiting    int                 `json:"waiting"`     // pull requests open now: it is listening
	Last       *protocol.Heartbeat `json:"last_heartbeat,omitempty"`
	Age        string              `json:"age,omitempty"` // since the last heartbeat
	Stale      bool                `json:"stale"`         // no heartbeat for three intervals
}

// Status lists the agents of the roster (the bus's topology), each with its
// task consumer's counts and its last heartbeat (FLOCK_STATUS keeps the
// last one of each; without that stream it listens to live heartbeats for
// listen). A heartbeat of an ID the roster does not have (an agent of an
// earlier deployment) is not listed.
func (c *Client) Status(ctx context.Context, listen time.Duration) ([]AgentStatus, error) {
	r, err := roster.Ask(ctx, c.nc)
	if err != nil {
		return nil, err
	}
	byID := map[string]*AgentStatus{}
	for _, id := range r.IDs() {
		st := &AgentStatus{ID: id}
		if cons, err := c.js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(id)); err == nil {
			info := cons.CachedInfo()
			st.InTopology = true
			st.Pending, st.Running, st.Waiting = info.NumPending, info.NumAckPending, info.NumWaiting
		}
		byID[id] = st
	}
	hbs, err := c.lastHeartbeats(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		hbs, err = c.listenHeartbeats(ctx, listen)
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, hb := range hbs {
		st := byID[hb.Agent]
		if st == nil {
			continue // not an agent of the flock
		}
		st.Last = hb
		age := now.Sub(hb.Time)
		st.Age = age.Round(time.Second).String()
		interval := time.Duration(hb.IntervalMS) * time.Millisecond
		st.Stale = hb.State == protocol.StateStopped || (interval > 0 && age > 3*interval)
	}
	out := make([]AgentStatus, 0, len(byID))
	for _, st := range byID {
		if st.Last == nil {
			st.Stale = true
		}
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (c *Client) lastHeartbeats(ctx context.Context) ([]*protocol.Heartbeat, error) {
	s, err := c.js.Stream(ctx, protocol.StreamStatus)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectHeartbeats))
	if err != nil {
		return nil, err
	}
	var out []*protocol.Heartbeat
	for subj := range info.State.Subjects {
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			continue
		}
		var hb protocol.Heartbeat
		if json.Unmarshal(m.Data, &hb) != nil {
			continue
		}
		hb.Agent = strings.TrimSuffix(strings.TrimPrefix(subj, "agent."), ".heartbeat") // the server vouches for the subject
		out = append(out, &hb)
	}
	return out, nil
}

func (c *Client) listenHeartbeats(ctx context.Context, d time.Duration) ([]*protocol.Heartbeat, error) {
	ch := make(chan *nats.Msg, 1024)
	sub, err := c.nc.ChanSubscribe(protocol.SubjectHeartbeats, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	last := map[string]*protocol.Heartbeat{}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			var out []*protocol.Heartbeat
			for _, hb := range last {
				out = append(out, hb)
			}
			return out, nil
		case m := <-ch:
			var hb protocol.Heartbeat
			if json.Unmarshal(m.Data, &hb) == nil {
				hb.Agent = strings.Split(m.Subject, ".")[1]
				last[hb.Agent] = &hb
			}
		}
	}
}
