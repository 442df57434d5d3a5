package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// The flock's roster is its topology's agents: the bus answers it on
// flock.roster, and what the bus keeps of an agent the topology no longer
// lists (its last heartbeat, its ledger entry; its results, mailbox and
// consumers: reconcile.go) goes when the topology that drops it is applied,
// so no view of the operator's shows an agent of an earlier deployment.

// topologyAgents are the agents whose task consumers topo declares, sorted.
func topologyAgents(topo protocol.Topology) []string {
	ids := []string{}
	for _, c := range topo.Consumers {
		if c.Stream == protocol.StreamTasks && c.Config.Durable != protocol.ConsumerPool {
			ids = append(ids, c.Config.Durable)
		}
	}
	sort.Strings(ids)
	return ids
}

// onRoster answers flock.roster with the flock's agent IDs. That is all an
// agent learns about its peers from the bus (not their heartbeats, tasks,
// results or events, which only the operator may read): the names it can
// address a message to.
func (s *Server) onRoster(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	b, _ := json.Marshal(protocol.Roster{V: protocol.Version, Agents: topologyAgents(s.Topology())})
	if err := m.Respond(b); err != nil {
		s.log.Warn("roster not sent", "err", err)
	}
}

// forgetRemovedAgents purges the stored heartbeats and deletes the ledger
// entries of agents topo does not list. A topology without the status
// stream or the ledger (an older one) has nothing of theirs to forget.
func (s *Server) forgetRemovedAgents(ctx context.Context, topo protocol.Topology) []error {
	keep := map[string]bool{}
	for _, id := range topologyAgents(topo) {
		keep[id] = true
	}
	var errs []error
	ctx, cancel := bounded(ctx)
	defer cancel()
	if st, err := s.js.Stream(ctx, protocol.StreamStatus); err == nil {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectHeartbeats))
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", protocol.StreamStatus, err))
		} else {
			for subj := range info.State.Subjects {
				id := strings.TrimSuffix(strings.TrimPrefix(subj, "agent."), ".heartbeat")
				if keep[id] {
					continue
				}
				if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
					errs = append(errs, fmt.Errorf("purge %s of %s: %w", subj, protocol.StreamStatus, err))
					continue
				}
				s.log.Info("forgot the last heartbeat of an agent no longer in the topology", "agent", id)
			}
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, fmt.Errorf("stream %s: %w", protocol.StreamStatus, err))
	}
	if kv, err := s.js.KeyValue(ctx, protocol.LedgerBucket); err == nil {
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return append(errs, fmt.Errorf("list %s: %w", protocol.LedgerBucket, err))
		}
		var stale []string
		for k := range keys.Keys() {
			if !keep[k] {
				stale = append(stale, k)
			}
		}
		for _, k := range stale {
			// Purge, not delete: nothing of a removed agent's spending stays.
			if err := kv.Purge(ctx, k); err != nil {
				errs = append(errs, fmt.Errorf("purge %s of %s: %w", k, protocol.LedgerBucket, err))
				continue
			}
			s.log.Info("deleted the ledger entry of an agent no longer in the topology", "agent", k)
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		errs = append(errs, fmt.Errorf("bucket %s: %w", protocol.LedgerBucket, err))
	}
	return errs
}
