package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A flock of 50 redeployed as one of 3: the bus forgets the 47 it no
// longer has (their last heartbeats, their ledger entries) as it applies
// the new topology, and its roster names the 3.
func TestAReloadForgetsTheAgentsItRemoves(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(50), bustest.WithoutServices())
	f.StoreHeartbeats(t, bustest.IDs(50)...)
	f.StoreLedgerEntries(t, 10, bustest.IDs(50)...)

	f.Rerender(t, bustest.Agents(3))
	op := f.Connect(t, protocol.OperatorUser)
	js := bustest.JetStream(t, op)
	want := bustest.IDs(3)
	if got := slices.Sorted(maps.Keys(bustest.StoredHeartbeats(t, js))); !slices.Equal(got, want) {
		t.Fatalf("stored heartbeats of %v after the reload, want %v", got, want)
	}
	if got := ledgerKeys(t, js); !slices.Equal(got, want) {
		t.Fatalf("ledger entries of %v after the reload, want %v", got, want)
	}
	cl, err := operator.New(op)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := cl.Roster(ctx); err != nil || !slices.Equal(got, want) {
		t.Fatalf("roster %v (%v), want %v", got, err, want)
	}
}

// Same ID, same identity: an agent the topology keeps across a redeploy
// keeps its mail, results, stored heartbeat and ledger entry. An ID the
// topology dropped and lists again starts with none of them: they went
// with the reload that removed it.
func TestAReusedIDInheritsOnlyWhatTheTopologyKept(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(3), bustest.WithoutServices())
	op := f.Connect(t, protocol.OperatorUser)
	cl, err := operator.New(op)
	if err != nil {
		t.Fatal(err)
	}
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"agent-2", "agent-3"} {
		if r, err := cl.Send(ctx, id, protocol.Message{V: protocol.Version, ID: "m-" + id, Body: "for " + id}, 50*time.Millisecond); err != nil || r.Status != protocol.ReceiptQueued {
			t.Fatalf("send to %s: %+v %v", id, r, err)
		}
		nc := f.Connect(t, id)
		b, _ := json.Marshal(protocol.Result{V: protocol.Version, TaskID: "t-" + id, Agent: id, Status: protocol.StatusOK})
		if err := nc.Publish(protocol.ResultSubject(id), b); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	f.StoreHeartbeats(t, "agent-2", "agent-3")
	f.StoreLedgerEntries(t, 700, "agent-2", "agent-3")
	waitMsgs(t, js, protocol.ResultsStream("agent-2"), 1)
	waitMsgs(t, js, protocol.ResultsStream("agent-3"), 1)

	kept := func(id string) {
		t.Helper()
		for _, s := range []string{protocol.OperatorMailStream(id), protocol.ResultsStream(id)} {
			if n := msgs(t, js, s); n != 1 {
				t.Errorf("%s holds %d messages, want 1 (kept with the ID)", s, n)
			}
		}
		if !bustest.StoredHeartbeats(t, js)[id] {
			t.Errorf("%s's last heartbeat was not kept", id)
		}
		if !slices.Contains(ledgerKeys(t, js), id) {
			t.Errorf("%s's ledger entry was not kept", id)
		}
	}
	// A redeploy that keeps every agent: nothing is lost.
	f.Rerender(t, bustest.Agents(3))
	kept("agent-2")
	kept("agent-3")

	// agent-3 removed, then listed again.
	f.Rerender(t, flock.Config{Target: "docker", Agents: []flock.AgentConfig{{ID: "agent-1"}, {ID: "agent-2"}}})
	f.Rerender(t, bustest.Agents(3))
	kept("agent-2")
	for _, s := range []string{protocol.OperatorMailStream("agent-3"), protocol.ResultsStream("agent-3")} {
		if n := msgs(t, js, s); n != 0 {
			t.Errorf("%s holds %d messages of the earlier agent-3, want none", s, n)
		}
	}
	if bustest.StoredHeartbeats(t, js)["agent-3"] {
		t.Error("the earlier agent-3's last heartbeat is still stored")
	}
	if slices.Contains(ledgerKeys(t, js), "agent-3") {
		t.Error("the new agent-3 inherits the earlier one's ledger entry (its spending)")
	}
}

func ledgerKeys(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int { return cmpNatural(a, b) })
	return out
}

// cmpNatural orders agent-2 before agent-10.
func cmpNatural(a, b string) int {
	var x, y int
	if _, err := fmt.Sscanf(a, "agent-%d", &x); err == nil {
		if _, err := fmt.Sscanf(b, "agent-%d", &y); err == nil {
			return x - y
		}
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

func msgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return info.State.Msgs
}

func waitMsgs(t *testing.T, js jetstream.JetStream, stream string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for msgs(t, js, stream) < n {
		if time.Now().After(deadline) {
			t.Fatalf("stream %s holds fewer than %d messages", stream, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
