package operator

import (
	"context"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
)

// Budgets is every agent's spending in its budget's current period, from
// the gateway's ledger on the bus (agents that made no metered call yet
// have no entry).
func (c *Client) Budgets(ctx context.Context) ([]protocol.LedgerEntry, error) {
	kv, err := ledger.Bucket(ctx, c.js)
	if err != nil {
		return nil, err
	}
	return ledger.List(ctx, kv, time.Now())
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
