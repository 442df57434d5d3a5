package services

// What the services know of the flock: the services bucket, which the bus
// writes from the topology it applied, followed as it changes.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/kvwatch"
	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// watchConfig follows the services bucket (waiting, within ctx, for the bus
// to have made it): the returned channel is closed once every entry was
// read; later changes go to the board as they come.
func (s *Services) watchConfig(ctx, run context.Context, js jetstream.JetStream) (<-chan struct{}, error) {
	var w jetstream.KeyWatcher
	for {
		kv, err := js.KeyValue(ctx, protocol.ServicesBucket)
		if err == nil {
			if w, err = kv.WatchAll(run); err == nil {
				break
			}
		}
		s.log.Info("waiting for the bus's services bucket", "bucket", protocol.ServicesBucket, "err", err)
		if !pace.Sleep(ctx, retryEvery) {
			return nil, fmt.Errorf("services: bucket %s: %w", protocol.ServicesBucket, err)
		}
	}
	s.watcher = w
	loaded := make(chan struct{})
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		done := false
		entry := func(e jetstream.KeyValueEntry) {
			s.take(e)
			if done {
				s.applyConfig()
			}
		}
		if kvwatch.Follow(run, w, entry, func() { done = true; close(loaded) }) {
			s.fail("the services bucket's watcher stopped")
		}
	}()
	return loaded, nil
}

// take records one entry of the services bucket.
func (s *Services) take(e jetstream.KeyValueEntry) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	key, del := e.Key(), e.Operation() != jetstream.KeyValuePut
	if id, ok := protocol.ServicesAgentOf(key); ok {
		if del {
			delete(s.agents, id)
			return
		}
		var a protocol.BoardAgent
		if err := json.Unmarshal(e.Value(), &a); err != nil || a.ID != id {
			s.log.Warn("unreadable services entry ignored", "key", key, "err", err)
			return
		}
		s.agents[id] = a
		return
	}
	if key == protocol.ServicesBoardKey {
		var b protocol.BoardConfig
		if del {
			s.boardS = b
			return
		}
		if err := json.Unmarshal(e.Value(), &b); err != nil {
			s.log.Warn("unreadable services entry ignored", "key", key, "err", err)
			return
		}
		b.Agents = nil
		s.boardS = b
	}
}

// BoardConfig is what the services bucket says of the board and its agents:
// what the board applies once a deploy's (or a reload's) entries arrive.
func (s *Services) BoardConfig() protocol.BoardConfig {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	c := s.boardS
	c.Agents = make([]protocol.BoardAgent, 0, len(s.agents))
	for _, a := range s.agents {
		c.Agents = append(c.Agents, a)
	}
	return c
}

// agentIDs are the flock's agents, as the services bucket says.
func (s *Services) agentIDs() []string {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	ids := make([]string, 0, len(s.agents))
	for id := range s.agents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *Services) isAgent(id string) bool {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	_, ok := s.agents[id]
	return ok
}

func (s *Services) applyConfig() {
	if s.board != nil {
		s.board.SetConfig(s.BoardConfig())
	}
	s.cfgMu.Lock()
	w := s.audit
	s.cfgMu.Unlock()
	if w != nil {
		if err := w.SetAgents(s.agentIDs()); err != nil {
			s.log.Warn("audit: the agents' inboxes not all followed", "err", err)
		}
	}
}
