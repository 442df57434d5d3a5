package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// The flock's services (flock-services: the board service) run apart from
// the bus, as a bus user of their own. What they must know of the agents
// (labels, limits) comes from the deploy through the topology the bus
// applies; the bus writes it into the services bucket, one entry per agent,
// so that a new agent reaches them without a redeploy of theirs.

// servicesApplied writes what topo says of the board into the services
// bucket: the board's settings, an entry per agent, and no entry for an
// agent no longer listed. An entry that holds the same value is left alone.
// A failure is logged and tried again with the next topology applied.
func (s *Server) servicesApplied(topo protocol.Topology) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := s.writeServicesConfig(ctx, topo.Board); err != nil {
		s.log.Warn("services configuration not written (tried again with the next topology applied)", "err", err)
	}
}

func (s *Server) writeServicesConfig(ctx context.Context, cfg protocol.BoardConfig) error {
	kv, err := s.js.KeyValue(ctx, protocol.ServicesBucket)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", protocol.ServicesBucket, err)
	}
	want := map[string][]byte{}
	settings := cfg
	settings.Agents = nil
	if want[protocol.ServicesBoardKey], err = json.Marshal(settings); err != nil {
		return err
	}
	for _, a := range cfg.Agents {
		if want[protocol.ServicesAgentKey(a.ID)], err = json.Marshal(a); err != nil {
			return err
		}
	}
	var errs []error
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", protocol.ServicesBucket, err)
	}
	for k := range keys.Keys() {
		if _, ok := want[k]; !ok {
			if err := kv.Delete(ctx, k); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", k, err))
			}
		}
	}
	for k, v := range want {
		e, err := kv.Get(ctx, k)
		if err == nil && bytes.Equal(e.Value(), v) {
			continue
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			errs = append(errs, fmt.Errorf("read %s: %w", k, err))
			continue
		}
		if _, err := kv.Put(ctx, k, v); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
