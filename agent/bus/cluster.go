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
// result. Each node reconciles the JetStream layout it was given, the
// JetStream meta leader applies the changes one at a time, and creating or
// updating a stream or consumer to the same config is a no-op: nodes that
// agree never fight, and they agree because the stacks give them the same
// topology in the same step. A node without a quorum cannot change the
// layout; it keeps trying until the cluster answers.

// startReconciler starts the background reconciler with topo as its first goal.
func (s *Server) startReconciler(topo protocol.Topology) {
	s.want <- topo
	s.done.Add(1)
	go s.reconcileLoop()
}

// reconcileLoop reconciles the newest wanted topology until it succeeds,
// backing off up to 5 s between tries.
func (s *Server) reconcileLoop() {
	defer s.done.Done()
	var (
		goal    protocol.Topology
		pending bool
		backoff = 250 * time.Millisecond
		retry   <-chan time.Time
	)
	for {
		select {
		case <-s.stop:
			return
		case goal = <-s.want:
			pending, backoff = true, 250*time.Millisecond
		case <-retry:
		}
		if !pending {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.reconcile(ctx, goal)
		cancel()
		if err == nil {
			pending, retry = false, nil
			s.mu.Lock()
			if s.generation == 0 {
				close(s.reconciled)
			}
			s.generation++
			s.applied.Broadcast()
			s.mu.Unlock()
			s.log.Info("topology reconciled", "streams", len(goal.Streams), "consumers", len(goal.Consumers))
			continue
		}
		s.log.Warn("topology not reconciled yet (no JetStream quorum?): retrying", "err", err, "retry_in", backoff.String())
		retry = time.After(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
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
// a single node once started; a cluster node once it has applied its
// topology and its JetStream state is current with the cluster's
// (nats-server's own health check, as on /healthz).
func (s *Server) Ready() error {
	if !s.clustered {
		return nil
	}
	select {
	case <-s.reconciled:
	default:
		return fmt.Errorf("topology not applied yet")
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
