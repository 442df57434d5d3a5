package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// needHealthy is need, then waits for every node's health check to pass.
func needHealthy(t *testing.T) {
	t.Helper()
	need(t)
	for n := 1; n <= 3; n++ {
		waitHealthy(t, n, 2*time.Minute)
	}
}

// operatorClient is an operator client on its own connection, closed when
// the test ends.
func operatorClient(t *testing.T) (*nats.Conn, *operator.Client) {
	t.Helper()
	nc, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := operator.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, cl
}

// Every node's health check passes once the cluster has formed: the check
// asks the bus itself whether it is current with the cluster.
func TestEveryNodeIsHealthy(t *testing.T) {
	needHealthy(t)
	// What a node costs in memory, with the flock idle.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 1; n <= 3; n++ {
		mem, err := engine.MemoryUsage(ctx, node(n))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f MiB in use", node(n), float64(mem)/(1<<20))
	}
}

// The route port carries the cluster's replication: no agent can reach it,
// neither on the node addresses of its own network nor on the bus network.
func TestAgentsCannotReachTheRoutes(t *testing.T) {
	need(t)
	subnet := netip.MustParsePrefix(pool)
	agentNet := netip.PrefixFrom(subnet.Addr(), 29) // slot 0 is the bus network
	for range 8 {                                   // agent-1's is slot 1: 8 addresses on
		agentNet = netip.PrefixFrom(agentNet.Addr().Next(), 29)
	}
	for n := 1; n <= 3; n++ {
		onAgentNet := nth(agentNet.Addr(), 1+n).String()
		onBusNet := nth(subnet.Addr(), 1+n).String()
		// Control: the node's client port answers on the agent's network.
		mustProbe(t, 0, "dial", onAgentNet+":4222")
		mustProbe(t, 1, "dial", onAgentNet+":6222")
		mustProbe(t, 1, "dial", onBusNet+":6222")
	}
}

func nth(a netip.Addr, k int) netip.Addr {
	for range k {
		a = a.Next()
	}
	return a
}

// mustProbe runs the probe in agent-1 and wants exit code want.
func mustProbe(t *testing.T, want int, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := engine.Exec(ctx, flockName+"-agent-1", append([]string{"/shared/agents/agent-1/.probe/probe"}, args...), "AGENT_ID=agent-1")
	if err != nil {
		t.Fatalf("probe %v: %v", args, err)
	}
	if res.ExitCode != want {
		t.Errorf("agent-1: probe %v: exit %d, want %d (%q %q)", args, res.ExitCode, want, res.Stdout, res.Stderr)
	}
}

// leader is the node that leads stream name.
func leader(t *testing.T, js jetstream.JetStream, name string) int {
	t.Helper()
	n, err := bustest.StreamLeader(js, name, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// heartbeatGap measures, for each agent, how long after since its next
// heartbeat came: how long the loss of a node kept it off the bus.
type heartbeatGap struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func watchHeartbeats(t *testing.T, nc *nats.Conn) *heartbeatGap {
	g := &heartbeatGap{last: map[string]time.Time{}}
	sub, err := nc.Subscribe(protocol.SubjectHeartbeats, func(m *nats.Msg) {
		var hb protocol.Heartbeat
		if json.Unmarshal(m.Data, &hb) == nil {
			g.mu.Lock()
			g.last[hb.Agent] = time.Now()
			g.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return g
}

// backAfter waits until every agent has a heartbeat after since and returns
// the longest wait.
func (g *heartbeatGap) backAfter(t *testing.T, since time.Time, d time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		g.mu.Lock()
		var worst time.Duration
		back := 0
		for _, at := range g.last {
			if at.After(since) {
				back++
				worst = max(worst, at.Sub(since))
			}
		}
		g.mu.Unlock()
		if back == agents {
			return worst
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d agents heartbeat again within %s", back, agents, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Tasks flow to the pool and to single agents while the node leading the
// task stream is killed (SIGKILL) and started again, then while every node is
// restarted in turn (stopped gracefully): every task the bus acknowledged has a stored result (duplicates, a
// task run twice, are counted: delivery is at least once).
func TestNodeLossAndRollingRestartLoseNoTask(t *testing.T) {
	needHealthy(t)
	nc, cl := operatorClient(t)
	js := cl.JetStream()
	beats := watchHeartbeats(t, nc)
	s := &bustest.Sender{JS: js}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	stopFlow := make(chan struct{})
	flowed := make(chan error, 1)
	sentN := 0
	go func() {
		defer close(flowed)
		for i := 0; ; i++ {
			select {
			case <-stopFlow:
				sentN = i
				return
			default:
			}
			subject := protocol.SubjectTasksPool
			if i%2 == 1 {
				subject = protocol.TaskSubject(fmt.Sprintf("agent-%d", 1+i/2%agents))
			}
			task := protocol.Task{V: protocol.Version, ID: fmt.Sprintf("f%04d", i), Kind: protocol.KindEcho, Stdin: "flow", Nonce: fmt.Sprintf("n%04d", i)}
			if err := s.Send(ctx, subject, task); err != nil {
				flowed <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	time.Sleep(2 * time.Second)
	lead := leader(t, js, protocol.StreamTasks)
	stopped := time.Now()
	killNode(t, lead)
	next := leader(t, js, protocol.StreamTasks)
	failover := time.Since(stopped)
	if next == lead {
		t.Fatalf("the stopped node %d still leads", lead)
	}
	back := beats.backAfter(t, stopped, time.Minute)
	t.Logf("killed node %d (leader of %s): node %d leads after %s; every agent heartbeat again within %s",
		lead, protocol.StreamTasks, next, failover.Round(time.Millisecond), back.Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	startNode(t, lead)
	t.Logf("node %d back and healthy after %s", lead, waitHealthy(t, lead, 2*time.Minute).Round(time.Millisecond))

	// Rolling restart: each node back and healthy before the next goes.
	for n := 1; n <= 3; n++ {
		stopNode(t, n)
		time.Sleep(time.Second)
		startNode(t, n)
		t.Logf("rolling restart: node %d healthy %s after its start", n, waitHealthy(t, n, 2*time.Minute).Round(time.Millisecond))
	}
	close(stopFlow)
	if err := <-flowed; err != nil {
		t.Fatal(err)
	}

	// Every acknowledged task has a stored result.
	var missing []string
	var byTask map[string]int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
		all, err := cl.StoredResults(rctx, time.Time{})
		rcancel()
		if err == nil {
			byTask = map[string]int{}
			for _, r := range all {
				if r.OK() && r.Stdout == "flow" {
					byTask[r.TaskID]++
				}
			}
			missing = missing[:0]
			for _, id := range s.Acked() {
				if byTask[id] == 0 {
					missing = append(missing, id)
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged tasks have no stored result (last read error %v): %v", len(missing), len(s.Acked()), err, missing)
		}
		time.Sleep(time.Second)
	}
	if len(s.Acked()) != sentN {
		t.Fatalf("%d tasks sent, %d acknowledged", sentN, len(s.Acked()))
	}
	twice := 0
	for _, n := range byTask {
		if n > 1 {
			twice++
		}
	}
	retries, longest := s.Cost()
	t.Logf("%d tasks through a node loss and a rolling restart: all stored, %d ran more than once; %d publish retries; longest wait for an ack %s",
		sentN, twice, retries, longest.Round(time.Millisecond))
}

// Two nodes of three down: no quorum. The operator's Run says the task was
// not stored instead of taking it and losing it; when the nodes return the
// flock works again.
func TestWithoutQuorumTheOperatorIsToldThenItRecovers(t *testing.T) {
	needHealthy(t)
	stopNode(t, 2)
	stopNode(t, 3)
	restarted := false
	t.Cleanup(func() { // never leave the next test a broken cluster
		if !restarted {
			startNode(t, 2)
			startNode(t, 3)
		}
	})
	_, cl := operatorClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	start := time.Now()
	_, err := cl.Run(ctx, operator.Target{Agent: "agent-1"}, protocol.Task{Kind: protocol.KindEcho, Stdin: "lonely"}, nil)
	cancel()
	var notStored *operator.NotStoredError
	if !errors.As(err, &notStored) {
		t.Fatalf("Run with one node of three: %v after %s; want a NotStoredError", err, time.Since(start))
	}
	t.Logf("without a quorum, after %s: %v", time.Since(start).Round(time.Millisecond), err)

	startNode(t, 2)
	startNode(t, 3)
	restarted = true
	for n := 1; n <= 3; n++ {
		t.Logf("node %d healthy %s after the quorum came back", n, waitHealthy(t, n, 3*time.Minute).Round(time.Millisecond))
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cl.Run(ctx, operator.Target{Agent: "agent-2"}, protocol.Task{Kind: protocol.KindEcho, Stdin: "quorum again"}, nil)
	if err != nil || len(res) != 1 || res[0].Stdout != "quorum again" {
		t.Fatalf("after the nodes returned: %+v %v", res, err)
	}
}
