package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"

	"github.com/ai-flock/ai-flock/tests/testkit"
)

// newClusterEnv is newEnv on a three-node bus: agents and the operator are
// given every node's address.
func newClusterEnv(t *testing.T, cfg flock.Config) *env {
	t.Helper()
	return envOn(t, bustest.StartCluster(t, cfg), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
}

// leaderOf is the number of the node that leads stream name.
func (e *env) leaderOf(name string) int {
	e.t.Helper()
	n, err := bustest.StreamLeader(e.js, name, 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// storedByTask reads every stored result, retrying while the cluster settles,
// keyed by task ID (a task that ran twice, at least once, has two).
func (e *env) storedByTask(d time.Duration) map[string][]protocol.Result {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		all, err := e.cl.StoredResults(ctx, time.Time{})
		cancel()
		if err == nil {
			out := map[string][]protocol.Result{}
			for _, r := range all {
				out[r.TaskID] = append(out[r.TaskID], r)
			}
			return out
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("read stored results: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Tasks flow to the pool and to single agents while the node leading the
// task stream is stopped and started again, and then every node is
// restarted in turn (a rolling restart): every task the bus acknowledged
// has a stored result, none is lost.
func TestClusterLosesANodeWithoutLosingTasks(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	e := newClusterEnv(t, flockWith(3, nil))
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		e.start(id)
	}
	p := &bustest.Sender{JS: e.js}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n = 240
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			subject := protocol.SubjectTasksPool
			if i%2 == 1 {
				subject = protocol.TaskSubject(fmt.Sprintf("agent-%d", 1+i/2%3))
			}
			task := tool(fmt.Sprintf("c%03d", i), "sleep", "20ms")
			task.Nonce = "n" + task.ID
			if err := p.Send(ctx, subject, task); err != nil {
				sent <- err
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
		sent <- nil
	}()

	time.Sleep(time.Second)
	leader := e.leaderOf(protocol.StreamTasks)
	stopped := time.Now()
	e.f.Stop(t, leader)
	t.Logf("stopped node %d (leader of %s)", leader, protocol.StreamTasks)
	newLeader := e.leaderOf(protocol.StreamTasks)
	t.Logf("failover: node %d leads %s %s after the stop", newLeader, protocol.StreamTasks, time.Since(stopped).Round(time.Millisecond))
	if newLeader == leader {
		t.Fatalf("the stopped node %d still leads", leader)
	}
	time.Sleep(2 * time.Second)
	e.f.Restart(t, leader)
	e.f.WaitReady(t, time.Minute)

	// Rolling restart: one node at a time, each back before the next goes.
	for _, node := range []int{1, 2, 3} {
		e.f.Stop(t, node)
		time.Sleep(time.Second)
		e.f.Restart(t, node)
		e.f.WaitReady(t, time.Minute)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	// Every acknowledged task has a stored result.
	var missing []string
	deadline := time.Now().Add(90 * time.Second)
	var byTask map[string][]protocol.Result
	for {
		byTask = e.storedByTask(30 * time.Second)
		missing = missing[:0]
		for _, id := range p.Acked() {
			if len(byTask[id]) == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(p.Acked()) != n {
		t.Fatalf("%d of %d tasks acknowledged", len(p.Acked()), n)
	}
	if len(missing) > 0 {
		t.Fatalf("%d acknowledged tasks have no stored result: %v", len(missing), missing)
	}
	twice := 0
	for id, rs := range byTask {
		if len(rs) > 1 {
			twice++
			t.Logf("task %s ran %d times (at least once): deduplicate by task ID", id, len(rs))
		}
		for _, r := range rs {
			if !r.OK() {
				t.Errorf("task %s: %+v", id, r)
			}
		}
	}
	retries, longest := p.Cost()
	t.Logf("%d tasks, all stored; %d ran more than once; %d publish retries; longest wait for an ack %s",
		n, twice, retries, longest.Round(time.Millisecond))
}

// With two of three nodes down the cluster has no quorum: a task is refused
// with an error (not acknowledged and then lost), and once a node returns the
// same publish is stored and run.
func TestClusterWithoutQuorumRefusesThenRecovers(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	e := newClusterEnv(t, flockWith(1, nil))
	e.start("agent-1")
	e.f.Stop(t, 2)
	e.f.Stop(t, 3)
	t.Cleanup(func() { // never leave the next test a broken cluster
		for _, n := range []int{2, 3} {
			if e.f.Nodes[n-1].Server() == nil {
				e.f.Restart(t, n)
			}
		}
	})

	b, _ := json.Marshal(echo("lonely", "no quorum"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	_, err := e.js.Publish(ctx, protocol.TaskSubject("agent-1"), b, jetstream.WithMsgID("lonely"))
	cancel()
	if err == nil {
		t.Fatal("a task was acknowledged by one node of three: it could be lost")
	}
	t.Logf("without a quorum the publisher is told: %v", err)

	// The operator's Run says the task was not stored, rather than waiting
	// for results that will never come.
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	start := time.Now()
	_, err = e.cl.Run(rctx, operator.Target{Agent: "agent-1"}, echo("lonely-run", "no quorum"), nil)
	rcancel()
	var notStored *operator.NotStoredError
	if !errors.As(err, &notStored) || notStored.TaskID != "lonely-run" || time.Since(start) > 30*time.Second {
		t.Fatalf("Run without a quorum returned %v after %s: want a NotStoredError for lonely-run", err, time.Since(start))
	}
	t.Logf("operator.Run without a quorum: %v", err)

	e.f.Restart(t, 2)
	e.f.WaitReady(t, time.Minute)
	ch := e.subscribeResults()
	p := &bustest.Sender{JS: e.js}
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer pcancel()
	task := echo("back", "quorum again")
	task.Nonce = "n-back"
	if err := p.Send(pctx, protocol.TaskSubject("agent-1"), task); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-ch:
			var r protocol.Result
			if json.Unmarshal(m.Data, &r) == nil && r.TaskID == "back" {
				if !r.OK() || r.Stdout != "quorum again" {
					t.Fatalf("result %+v", r)
				}
				return
			}
		case <-deadline:
			t.Fatal("no result after the quorum came back")
		}
	}
}
