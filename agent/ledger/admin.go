package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// The operator's side of the ledger: reading every entry (the CLI and the
// operator's MCP server) and changing one (the CLI only: an AI coordinator
// that could raise budgets would defeat them).

// ErrNoEntry is returned for an agent the ledger has no entry for: it has
// made no metered call yet.
var ErrNoEntry = errors.New("no ledger entry: the agent has made no metered call")

// ErrNoBudget is returned for a raise of an agent without a budget.
var ErrNoBudget = errors.New("no budget to raise")

// Bucket binds the ledger's bucket on js.
func Bucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		return nil, fmt.Errorf("ledger bucket %s: %w", protocol.LedgerBucket, err)
	}
	return kv, nil
}

// List returns every agent's entry, by agent ID, each brought up to now (a
// window that has started over since the last call shows nothing spent).
func List(ctx context.Context, kv jetstream.KeyValue, now time.Time) ([]protocol.LedgerEntry, error) {
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for k := range keys.Keys() {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]protocol.LedgerEntry, 0, len(names))
	for _, k := range names {
		e, _, err := get(ctx, kv, k)
		if errors.Is(err, ErrNoEntry) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		e.Roll(e.Window, now)
		out = append(out, e)
	}
	return out, nil
}

// Raise adds tokens to agent's limit for the current period.
func Raise(ctx context.Context, kv jetstream.KeyValue, agent string, tokens int64, now time.Time) (protocol.LedgerEntry, error) {
	if tokens <= 0 {
		return protocol.LedgerEntry{}, fmt.Errorf("tokens: must be positive (got %d)", tokens)
	}
	return change(ctx, kv, agent, now, func(e *protocol.LedgerEntry) error {
		if e.Budget <= 0 {
			return fmt.Errorf("agent %s has %w: set flock:agents[].gateway.budgetTokens (or flock:gateway.budgetTokens)", agent, ErrNoBudget)
		}
		e.Raised = sat(e.Raised, tokens)
		return nil
	})
}

// Reset starts agent's current period over: nothing spent, nothing raised.
// Calls in flight are charged their cost when they end.
func Reset(ctx context.Context, kv jetstream.KeyValue, agent string, now time.Time) (protocol.LedgerEntry, error) {
	return change(ctx, kv, agent, now, func(e *protocol.LedgerEntry) error {
		e.Spent, e.Raised = 0, 0
		e.Epoch++
		return nil
	})
}

// change applies fn to agent's entry with compare-and-set, reading it again
// if a gateway wrote it meanwhile.
func change(ctx context.Context, kv jetstream.KeyValue, agent string, now time.Time, fn func(*protocol.LedgerEntry) error) (protocol.LedgerEntry, error) {
	if err := protocol.ValidateLedgerKey(agent); err != nil {
		return protocol.LedgerEntry{}, err
	}
	for range maxConflicts {
		e, rev, err := get(ctx, kv, agent)
		if err != nil {
			return e, err
		}
		e.Roll(e.Window, now)
		if err := fn(&e); err != nil {
			return e, err
		}
		e.Updated, e.By = now.UTC(), "operator"
		data, err := json.Marshal(e)
		if err != nil {
			return e, err
		}
		if _, err = kv.Update(ctx, agent, data, rev); err == nil {
			return e, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
			return e, err
		}
	}
	return protocol.LedgerEntry{}, fmt.Errorf("entry of %s: %d conflicts in a row with the gateway's writes", agent, maxConflicts)
}

// get reads agent's entry. An entry that does not decode is returned empty
// but for the agent, so that Reset can write a good one over it.
func get(ctx context.Context, kv jetstream.KeyValue, agent string) (protocol.LedgerEntry, uint64, error) {
	got, err := kv.Get(ctx, agent)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return protocol.LedgerEntry{}, 0, fmt.Errorf("%s: %w", agent, ErrNoEntry)
	}
	if err != nil {
		return protocol.LedgerEntry{}, 0, err
	}
	var e protocol.LedgerEntry
	if json.Unmarshal(got.Value(), &e) != nil || e.Agent != agent {
		e = protocol.LedgerEntry{V: 1, Agent: agent}
	}
	return e, got.Revision(), nil
}
