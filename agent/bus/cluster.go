package bus

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A clustered bus is three nodes with the same users and topology; every
// stream is kept on all three (R3), so any two of them hold every task and
// result. Only the node that is the JetStream meta leader changes the
// layout: three nodes creating the same streams at once made each stream
// take ten seconds (their requests collide at the leader), and a node with
// an older topology must not delete what a newer one made. The others wait
// until the layout they were given is there. A node that becomes leader
// with a topology it has not applied yet applies it. Without a quorum there
// is no leader, and every node keeps waiting.

// startReconciler starts the background reconciler with topo as its first goal.
func (s *Server) startReconciler(topo protocol.Topology) {
	s.want <- topo
	s.done.Add(1)
	go s.reconcileLoop()
}

// reconcileLoop applies the newest wanted topology: as the meta leader it
// reconciles it, otherwise it waits until the leader's layout has it.
func (s *Server) reconcileLoop() {
	defer s.done.Done()
	var (
		goal    protocol.Topology
		pending bool
		tick    = time.NewTicker(250 * time.Millisecond)
		lastErr string
	)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case goal = <-s.want:
			pending = true
		case <-tick.C:
		}
		if !pending {
			continue
		}
		var err error
		leader := s.ns.JetStreamIsLeader()
		if leader {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = s.reconcile(ctx, goal)
			cancel()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = s.layoutHas(ctx, goal)
			cancel()
		}
		if err != nil {
			if msg := err.Error(); msg != lastErr { // once per distinct reason, not every tick
				s.log.Info("topology not applied yet: waiting for the cluster", "leader", leader, "reason", msg)
				lastErr = msg
				s.mu.Lock()
				s.waitingFor = fmt.Sprintf("%s (meta leader: %t)", msg, leader)
				s.mu.Unlock()
			}
			continue
		}
		pending, lastErr = false, ""
		s.mu.Lock()
		s.waitingFor = ""
		if s.generation == 0 {
			close(s.reconciled)
		}
		s.generation++
		s.topology = goal
		s.applied.Broadcast()
		s.mu.Unlock()
		s.servicesApplied(goal)
		s.log.Info("topology applied", "by_this_node", leader, "streams", len(goal.Streams), "consumers", len(goal.Consumers))
	}
}

// layoutHas reports whether every stream, bucket and consumer of topo exists (two
// list requests, whatever the size of the flock).
func (s *Server) layoutHas(ctx context.Context, topo protocol.Topology) error {
	streams := map[string]bool{}
	names := s.js.StreamNames(ctx)
	for n := range names.Name() {
		streams[n] = true
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list streams: %w", err)
	}
	for _, sc := range topo.Streams {
		if !streams[sc.Name] {
			return fmt.Errorf("stream %s not made yet", sc.Name)
		}
	}
	for _, kc := range topo.KeyValues {
		if !streams["KV_"+kc.Bucket] {
			return fmt.Errorf("bucket %s not made yet", kc.Bucket)
		}
	}
	for _, oc := range topo.ObjectStores {
		if !streams["OBJ_"+oc.Bucket] {
			return fmt.Errorf("object store %s not made yet", oc.Bucket)
		}
	}
	consumers := map[string]map[string]bool{}
	for _, c := range topo.Consumers {
		if consumers[c.Stream] == nil {
			consumers[c.Stream] = map[string]bool{}
			st, err := s.js.Stream(ctx, c.Stream)
			if err != nil {
				return fmt.Errorf("stream %s: %w", c.Stream, err)
			}
			list := st.ConsumerNames(ctx)
			for n := range list.Name() {
				consumers[c.Stream][n] = true
			}
			if err := list.Err(); err != nil {
				return fmt.Errorf("list consumers of %s: %w", c.Stream, err)
			}
		}
		if !consumers[c.Stream][c.Config.Durable] {
			return fmt.Errorf("consumer %s/%s not made yet", c.Stream, c.Config.Durable)
		}
	}
	return nil
}

// reconcileInBackground hands topo to the reconciler and waits until it is
// applied or ctx ends; the reconciler goes on trying after that.
func (s *Server) reconcileInBackground(ctx context.Context, topo protocol.Topology) error {
	s.mu.Lock()
	start := s.generation
	s.mu.Unlock()
	select {
	case <-s.want: // an older goal not yet taken: the newest wins
	default:
	}
	s.want <- topo
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for s.generation == start && !s.closing {
			s.applied.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bus: topology not applied yet (the cluster has no quorum?); still trying: %w", ctx.Err())
	}
}

// Reconciled is closed once this node has applied its topology (at once
// for a single node).
func (s *Server) Reconciled() <-chan struct{} {
	if !s.clustered {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.reconciled
}

// Ready reports whether the node is fit to take clients' JetStream work:
// its topology is applied (a single node applies it before Start returns)
// and its JetStream is healthy and current with the cluster's
// (nats-server's own health check, the one its /healthz endpoint answers).
func (s *Server) Ready() error {
	select {
	case <-s.Reconciled():
	default:
		s.mu.Lock()
		why := s.waitingFor
		s.mu.Unlock()
		if why == "" {
			return fmt.Errorf("topology not applied yet")
		}
		return fmt.Errorf("topology not applied yet: %s", why)
	}
	if st := s.ns.Healthz(nil); st.Error != "" {
		return fmt.Errorf("%s", st.Error)
	}
	return nil
}

func parseRoutes(raw []string) ([]*url.URL, error) {
	out := make([]*url.URL, 0, len(raw))
	for _, r := range raw {
		u, err := url.Parse(r)
		if err != nil {
			return nil, fmt.Errorf("bus: route %q: %w", r, err)
		}
		out = append(out, u)
	}
	return out, nil
}
