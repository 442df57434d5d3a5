package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/bus"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"

	"github.com/ai-flock/ai-flock/tests/testkit"
)

// waitHealthy polls node num's Healthy until it says yes.
func waitHealthy(t *testing.T, f *bustest.Bus, num int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := f.Nodes[num-1].Server().Healthy()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("node %d not healthy after %s: %v", num, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Each node is replaced by one with an empty store (a Fargate task's
// ephemeral storage is gone with the task), one after another, each only
// once the last is Healthy: Healthy waits until a new node has caught up,
// so the tasks survive all three replacements. A health check that said yes
// at once would let the last copy go before the new ones had it.
func TestClusterHealthyMeansCurrent(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	f := bustest.StartCluster(t, bustest.Agents(1))
	nc := f.Connect(t, protocol.OperatorUser)
	js := bustest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 300
	for i := range n {
		if _, err := js.Publish(ctx, protocol.SubjectTasksPool, []byte(`{"v":1,"id":"t","kind":"echo"}`)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	for _, num := range []int{1, 2, 3} {
		f.Stop(t, num)
		f.WipeStore(t, num)
		f.Restart(t, num)
		t.Logf("node %d replaced with an empty store: healthy after %s", num, waitHealthy(t, f, num, time.Minute).Round(time.Millisecond))
	}
	f.WaitReady(t, time.Minute)
	var msgs uint64
	for range 100 {
		s, err := js.Stream(ctx, protocol.StreamTasks)
		if err == nil {
			msgs = s.CachedInfo().State.Msgs
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if msgs != n {
		t.Fatalf("%s holds %d tasks after three replacements, want %d", protocol.StreamTasks, msgs, n)
	}
}

// The first node of a cluster started one service at a time is alone: not
// Ready (it cannot be current without a quorum), but Healthy after the
// bootstrap grace so that the orchestrator starts the next node. Once the
// others are up it is Ready.
func TestLoneNodeIsHealthyOnlyAfterTheBootstrapGrace(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	f := bustest.NewCluster(t, bustest.Agents(1))
	f.BootstrapGrace = 2 * time.Second
	f.Restart(t, 1)
	node := f.Nodes[0].Server()
	if err := node.Healthy(); err == nil {
		t.Fatal("a lone node is healthy before the bootstrap grace")
	}
	took := waitHealthy(t, f, 1, 20*time.Second)
	if took < time.Second {
		t.Fatalf("healthy %s after start: before the 2 s grace", took)
	}
	if err := node.Ready(); err == nil {
		t.Fatal("a lone node says it is Ready (current) without a quorum")
	}
	f.Restart(t, 2)
	f.Restart(t, 3)
	f.WaitReady(t, time.Minute)
	js := bustest.JetStream(t, f.Connect(t, protocol.OperatorUser))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, protocol.SubjectTasksPool, []byte(`{}`), jetstream.WithMsgID("x")); err != nil {
		t.Fatalf("publish once the cluster formed: %v", err)
	}
}

func TestCheckReady(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ready")
	if err := bus.CheckReady(p, time.Minute); err == nil {
		t.Fatal("a missing ready file passes")
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bus.CheckReady(p, time.Minute); err != nil {
		t.Fatalf("a fresh ready file fails: %v", err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if err := bus.CheckReady(p, time.Minute); err == nil {
		t.Fatal("an hour-old ready file passes")
	}
}
