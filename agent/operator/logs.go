package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// ErrNoAnswer is an agent that did not answer a logs request in time: not
// running, not connected, or not of the flock.
var ErrNoAnswer = errors.New("no answer")

// Logs asks agent id for its last lines log lines (all it keeps when 0).
// The agent answers on its own subject, which only it may serve; the
// answer is bounded (protocol.LogsMaxBytes).
func (c *Client) Logs(ctx context.Context, id string, lines int) (protocol.LogsReply, error) {
	var out protocol.LogsReply
	if _, err := protocol.ParseAgentID(id); err != nil {
		return out, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
	}
	body, _ := json.Marshal(protocol.LogsRequest{Lines: lines})
	m, err := c.nc.RequestWithContext(ctx, protocol.LogsSubject(id), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return out, fmt.Errorf("%s: %w (not running, or not an agent of this flock)", id, ErrNoAnswer)
	case err != nil:
		return out, fmt.Errorf("%s: %w", id, err)
	}
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return out, fmt.Errorf("%s: unreadable answer: %w", id, err)
	}
	if out.Agent != id {
		return out, fmt.Errorf("%s: answer names %q", id, out.Agent)
	}
	return out, nil
}

// TaskQueues is the task stream as the operator sees it at a glance: how
// many tasks wait for each agent (its consumer's pending count) and for the
// pool, and the stream's replicas: how many nodes hold it and how many are
// current, and which leads (a one-node bus: 1 of 1, no leader named).
type TaskQueues struct {
	Agents   map[string]uint64
	Pool     uint64
	Replicas int    // nodes that hold the stream
	Current  int    // of which caught up and online (the leader included)
	Leader   string // the node that leads it ("" on a one-node bus)
}

// Queues reads TaskQueues: one stream info and one listing of its consumers.
func (c *Client) Queues(ctx context.Context) (TaskQueues, error) {
	q := TaskQueues{Agents: map[string]uint64{}, Replicas: 1, Current: 1}
	s, err := c.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		return q, fmt.Errorf("stream %s: %w", protocol.StreamTasks, err)
	}
	if cl := s.CachedInfo().Cluster; cl != nil && cl.Leader != "" {
		q.Leader, q.Replicas, q.Current = cl.Leader, 1+len(cl.Replicas), 1
		for _, r := range cl.Replicas {
			if r.Current && !r.Offline {
				q.Current++
			}
		}
	}
	l := s.ListConsumers(ctx)
	for info := range l.Info() {
		if info.Name == protocol.ConsumerPool {
			q.Pool = info.NumPending + uint64(info.NumAckPending)
			continue
		}
		q.Agents[info.Name] = info.NumPending
	}
	return q, l.Err()
}
