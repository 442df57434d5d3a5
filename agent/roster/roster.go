// Package roster is the flock's agents as the operator's views know them:
// the bus's answer on flock.roster, the agents of the topology it applied.
// What was heard of other IDs (heartbeats kept from an earlier deployment,
// ledger entries, events) names no agent of the flock: `top`, `agents`,
// the operator's MCP server and the exporter list roster agents only, and
// an agent of the roster that was never heard shows as silent.
package roster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Roster is a set of agent IDs. The zero Roster is unknown (not read yet):
// Known says which.
type Roster struct {
	ids []string
	set map[string]bool
}

// Of is the roster of ids.
func Of(ids []string) Roster {
	r := Roster{ids: slices.Clone(ids), set: make(map[string]bool, len(ids))}
	slices.Sort(r.ids)
	r.ids = slices.Compact(r.ids)
	for _, id := range r.ids {
		r.set[id] = true
	}
	return r
}

// Ask asks the bus for the roster (agents and the operator may).
func Ask(ctx context.Context, nc *nats.Conn) (Roster, error) {
	m, err := nc.RequestWithContext(ctx, protocol.SubjectRoster, nil)
	if err != nil {
		return Roster{}, fmt.Errorf("roster: %w", err)
	}
	var r protocol.Roster
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return Roster{}, fmt.Errorf("roster: the bus's answer: %w", err)
	}
	if r.V > protocol.Version {
		return Roster{}, fmt.Errorf("roster: v %d is newer than this client's %d", r.V, protocol.Version)
	}
	return Of(r.Agents), nil
}

// Known reports whether the roster was read.
func (r Roster) Known() bool { return r.set != nil }

// Has reports whether id is an agent of the roster.
func (r Roster) Has(id string) bool { return r.set[id] }

// IDs are the roster's agents, sorted; never nil.
func (r Roster) IDs() []string {
	if r.ids == nil {
		return []string{}
	}
	return slices.Clone(r.ids)
}

// Len is how many agents the roster has.
func (r Roster) Len() int { return len(r.ids) }
