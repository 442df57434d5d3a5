package operator

import (
	"context"
	"fmt"

	"github.com/ai-flock/ai-flock/protocol"
)

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
