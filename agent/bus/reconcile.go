package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// requestTimeout bounds each JetStream request of a reconcile. In a cluster
// that has just regained its quorum, a stream may have no leader yet and a
// request about it gets no answer: without a bound of its own it would hold
// the whole pass until the pass's deadline (seen: a node not ready a minute
// after a restart), and the streams that were fine would wait with it.
const requestTimeout = 10 * time.Second

func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

// reconcile makes the JetStream layout match topo: streams and consumers are
// created or updated; durable consumers on the task stream that topo no longer
// lists are deleted (an agent that left the flock), so interest retention
// never keeps tasks for an agent that is gone. Every problem is reported;
// one failing item does not stop the others.
func (s *Server) reconcile(ctx context.Context, topo protocol.Topology) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	errs = append(errs, s.removeStaleStreams(ctx, topo)...)
	errs = append(errs, createOrUpdateAll(ctx, topo.Streams, func(sc jetstream.StreamConfig) string { return "stream " + sc.Name }, s.js.CreateOrUpdateStream)...)
	errs = append(errs, createOrUpdateAll(ctx, topo.KeyValues, func(kc jetstream.KeyValueConfig) string { return "bucket " + kc.Bucket }, s.js.CreateOrUpdateKeyValue)...)
	errs = append(errs, createOrUpdateAll(ctx, topo.ObjectStores, func(oc jetstream.ObjectStoreConfig) string { return "object store " + oc.Bucket }, s.js.CreateOrUpdateObjectStore)...)
	want := map[string]map[string]bool{} // stream -> consumer names
	for _, c := range topo.Consumers {
		if want[c.Stream] == nil {
			want[c.Stream] = map[string]bool{}
		}
		want[c.Stream][c.Config.Durable] = true
	}
	errs = append(errs, createOrUpdateAll(ctx, topo.Consumers, func(c protocol.Consumer) string { return "consumer " + c.Stream + "/" + c.Config.Durable },
		func(ctx context.Context, c protocol.Consumer) (jetstream.Consumer, error) {
			return s.js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
		})...)
	// Only the task stream's consumers are owned by the topology; other
	// streams may carry consumers the operator made (e.g. to read results).
	if slices.ContainsFunc(topo.Streams, func(sc jetstream.StreamConfig) bool { return sc.Name == protocol.StreamTasks }) {
		ctx, cancel := bounded(ctx)
		defer cancel()
		stream, err := s.js.Stream(ctx, protocol.StreamTasks)
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", protocol.StreamTasks, err))
		} else {
			names := stream.ConsumerNames(ctx)
			var stale []string
			for n := range names.Name() {
				if !want[protocol.StreamTasks][n] {
					stale = append(stale, n)
				}
			}
			if err := names.Err(); err != nil {
				errs = append(errs, fmt.Errorf("list consumers: %w", err))
			}
			for _, n := range stale {
				if err := s.handBackCopies(ctx, stream, n, poolMaxDeliver(topo)); err != nil {
					errs = append(errs, fmt.Errorf("consumer %s: its pool tasks: %w", n, err))
					continue
				}
				if err := s.js.DeleteConsumer(ctx, protocol.StreamTasks, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
					errs = append(errs, fmt.Errorf("delete consumer %s: %w", n, err))
					continue
				}
				s.log.Info("deleted consumer no longer in the topology", "stream", protocol.StreamTasks, "consumer", n)
			}
		}
	}
	errs = append(errs, s.forgetRemovedAgents(ctx, topo)...)
	s.topology = topo
	if len(errs) > 0 {
		return fmt.Errorf("bus: reconcile: %w", errors.Join(errs...))
	}
	return nil
}

// createOrUpdateAll creates or updates every item, each request under a
// bound of its own, and returns the failures, each named by what (a kind
// and a name: "stream X").
func createOrUpdateAll[C, R any](ctx context.Context, items []C, what func(C) string, createOrUpdate func(context.Context, C) (R, error)) []error {
	var errs []error
	for _, c := range items {
		rctx, cancel := bounded(ctx)
		_, err := createOrUpdate(rctx, c)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what(c), err))
		}
	}
	return errs
}

// removeStaleStreams deletes the results streams the topology no longer has:
// the one all agents shared in earlier versions (its subjects overlap the
// per-agent streams, which could not be created beside it), and those of
// agents that were removed (with their consumers; their share of the store
// goes back to the others).
func (s *Server) removeStaleStreams(ctx context.Context, topo protocol.Topology) []error {
	want := map[string]bool{}
	for _, sc := range topo.Streams {
		want[sc.Name] = true
	}
	var errs []error
	ctx, cancel := bounded(ctx)
	defer cancel()
	names := s.js.StreamNames(ctx)
	var stale []string
	for n := range names.Name() {
		// A removed agent's results and mailbox: nobody reads them, and
		// they hold their share of the store.
		if !want[n] && (n == protocol.StreamResults || strings.HasPrefix(n, protocol.ResultsStream("")) || strings.HasPrefix(n, protocol.MailStream("")) || strings.HasPrefix(n, protocol.OperatorMailStream(""))) {
			stale = append(stale, n)
		}
	}
	if err := names.Err(); err != nil {
		return []error{fmt.Errorf("list streams: %w", err)}
	}
	for _, n := range stale {
		if err := s.js.DeleteStream(ctx, n); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("delete stream %s: %w", n, err))
			continue
		}
		s.log.Info("deleted a stream no longer in the topology (a removed agent's results or mailbox)", "stream", n)
	}
	return errs
}
