package bustest

// An earlier deployment's traces: what a flock of more agents left on the
// bus (each agent's last heartbeat, its ledger entry) before a topology
// with fewer replaced it.

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// StoreHeartbeats publishes one heartbeat of each agent, with its own key,
// and waits until the status stream keeps every one of them.
func (f *Bus) StoreHeartbeats(tb testing.TB, ids ...string) {
	tb.Helper()
	for _, id := range ids {
		nc, err := f.Dial(tb, id)
		if err != nil {
			tb.Fatalf("connect as %s: %v", id, err)
		}
		hb, _ := json.Marshal(protocol.Heartbeat{V: protocol.Version, Agent: id, Time: time.Now(), State: protocol.StateReady, IntervalMS: 1000})
		err = nc.Publish(protocol.HeartbeatSubject(id), hb)
		if err == nil {
			err = nc.Flush()
		}
		nc.Close()
		if err != nil {
			tb.Fatalf("heartbeat of %s: %v", id, err)
		}
	}
	js := JetStream(tb, f.Connect(tb, protocol.OperatorUser))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := StoredHeartbeats(tb, js)
		missing := 0
		for _, id := range ids {
			if !got[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d heartbeats not stored", missing, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StoredHeartbeats are the agents whose last heartbeat the status stream
// keeps.
func StoredHeartbeats(tb testing.TB, js jetstream.JetStream) map[string]bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, protocol.StreamStatus)
	if err != nil {
		tb.Fatalf("stream %s: %v", protocol.StreamStatus, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectHeartbeats))
	if err != nil {
		tb.Fatalf("stream %s: %v", protocol.StreamStatus, err)
	}
	out := map[string]bool{}
	for subj, n := range info.State.Subjects {
		if n > 0 {
			out[subj[len("agent."):len(subj)-len(".heartbeat")]] = true
		}
	}
	return out
}

// StoreLedgerEntries writes a ledger entry of spent tokens for each agent,
// as the operator (who may write the ledger: budget raises and resets).
func (f *Bus) StoreLedgerEntries(tb testing.TB, spent int64, ids ...string) {
	tb.Helper()
	js := JetStream(tb, f.Connect(tb, protocol.OperatorUser))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		tb.Fatalf("bucket %s: %v", protocol.LedgerBucket, err)
	}
	for _, id := range ids {
		b, _ := json.Marshal(protocol.LedgerEntry{V: 1, Agent: id, Window: protocol.WindowNone, Spent: spent, Budget: 1000, Updated: time.Now(), By: "operator"})
		if _, err := kv.Put(ctx, id, b); err != nil {
			tb.Fatalf("ledger entry of %s: %v", id, err)
		}
	}
}

// IDs are agent-1 … agent-n.
func IDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "agent-" + strconv.Itoa(i+1)
	}
	return ids
}
