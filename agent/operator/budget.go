package operator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/kvwatch"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
)

// Budgets is every agent's spending in its budget's current period, from
// the gateway's ledger on the bus (agents that made no metered call yet
// have no entry).
func (c *Client) Budgets(ctx context.Context) ([]protocol.LedgerEntry, error) {
	return c.ledgerEntries(ctx, isAgentEntry)
}

// EgressBudgets is what each agent moved under each egress rule with a
// byte budget, in the current period (entries egress.<agent>.<rule>).
func (c *Client) EgressBudgets(ctx context.Context) ([]protocol.LedgerEntry, error) {
	return c.ledgerEntries(ctx, func(key string) bool { return strings.HasPrefix(key, protocol.EgressLedgerPrefix) })
}

// ledgerEntries is the ledger's entries whose key keep accepts, each
// brought up to now.
func (c *Client) ledgerEntries(ctx context.Context, keep func(key string) bool) ([]protocol.LedgerEntry, error) {
	kv, err := ledger.Bucket(ctx, c.js)
	if err != nil {
		return nil, err
	}
	all, err := ledger.List(ctx, kv, time.Now())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(e protocol.LedgerEntry) bool { return !keep(e.Agent) }), nil
}

// isAgentEntry: the ledger's key is an agent's (its model budget), not an
// egress rule's.
func isAgentEntry(key string) bool {
	_, err := protocol.ParseAgentID(key)
	return err == nil
}

// RaiseBudget adds tokens to agent's limit for its current period. Only the
// CLI offers it: the operator's MCP server reads budgets and never changes
// them.
func (c *Client) RaiseBudget(ctx context.Context, agent string, tokens int64) (protocol.LedgerEntry, error) {
	kv, err := ledger.Bucket(ctx, c.js)
	if err != nil {
		return protocol.LedgerEntry{}, err
	}
	return ledger.Raise(ctx, kv, agent, tokens, time.Now())
}

// ResetBudget starts agent's current period over: nothing spent, nothing
// raised. CLI only, as RaiseBudget.
func (c *Client) ResetBudget(ctx context.Context, agent string) (protocol.LedgerEntry, error) {
	kv, err := ledger.Bucket(ctx, c.js)
	if err != nil {
		return protocol.LedgerEntry{}, err
	}
	return ledger.Reset(ctx, kv, agent, time.Now())
}

// WatchBudgets calls fn with every agent's ledger entry, each one now and
// again whenever the gateway or the operator writes it, until ctx ends; a
// deleted entry comes as an entry with only its agent. ready (if set) is
// called once the entries there were have all come.
func (c *Client) WatchBudgets(ctx context.Context, fn func(protocol.LedgerEntry), ready func()) error {
	kv, err := ledger.Bucket(ctx, c.js)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	kvwatch.Follow(ctx, w, func(u jetstream.KeyValueEntry) {
		if !isAgentEntry(u.Key()) {
			return // an egress rule's bytes
		}
		e := protocol.LedgerEntry{Agent: u.Key()}
		if u.Operation() == jetstream.KeyValuePut {
			if json.Unmarshal(u.Value(), &e) != nil || e.Agent != u.Key() {
				return
			}
			e.Roll(e.Window, time.Now())
		}
		fn(e)
	}, ready)
	return nil
}
