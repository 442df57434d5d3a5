package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// boardEvents is every transition of a plan's tasks the board published,
// as the operator saw it on one connection to each node (a node lost
// takes its connection's subscription with it; the others still hear).
// A transition is a task's entry at one revision: heard on several
// connections, it is counted once.
type boardEvents struct {
	mu    sync.Mutex
	plan  string
	seen  map[string]map[uint64]protocol.BoardTask // task ID -> revision -> the task
	heard int
}

func watchBoardEvents(t *testing.T, plan string) *boardEvents {
	t.Helper()
	w := &boardEvents{plan: plan, seen: map[string]map[uint64]protocol.BoardTask{}}
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	for n := 1; n <= 3; n++ {
		url := fmt.Sprintf("nats://127.0.0.1:%d", 4221+n)
		nc, err := nats.Connect(url,
			nats.Nkey(pub, kp.Sign),
			nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.OperatorInboxToken)),
			nats.Name(fmt.Sprintf("e2e-cluster-board-events-%d", n)),
			nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			t.Fatalf("events on node %d: %v", n, err)
		}
		t.Cleanup(nc.Close)
		if _, err := nc.Subscribe("board.events."+plan+".*", w.take); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *boardEvents) take(m *nats.Msg) {
	var task protocol.BoardTask
	if err := json.Unmarshal(m.Data, &task); err != nil || task.Plan != w.plan {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.heard++
	if w.seen[task.ID] == nil {
		w.seen[task.ID] = map[uint64]protocol.BoardTask{}
	}
	w.seen[task.ID][task.Revision] = task
}

// doneTransitions is, per task, how many distinct transitions to done
// were published.
func (w *boardEvents) doneTransitions() (map[string]int, int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	done, distinct := map[string]int{}, 0
	for id, revs := range w.seen {
		distinct += len(revs)
		for _, task := range revs {
			if task.Status == protocol.BoardDone {
				done[id]++
			}
		}
	}
	return done, distinct, w.heard
}

// boardDone counts a plan's done tasks, as the board says.
func boardDone(cl *board.Client, plan string) (done int, tasks []protocol.BoardTask, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tasks, err = cl.List(ctx, plan)
	for _, task := range tasks {
		if task.Status == protocol.BoardDone {
			done++
		}
	}
	return done, tasks, err
}

// waitDone waits until at least n tasks of plan are done.
func waitDone(t *testing.T, cl *board.Client, plan string, n int, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		done, _, err := boardDone(cl, plan)
		if err == nil && done >= n {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks of %s done after %s, want %d (last error %v)", done, plan, d, n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The operator applies a plan of 60 run tasks (12 chains of 5: each task
// needs the one before it in its chain) that the three agents run; mid-plan
// a node that does not lead the board's stream is killed (SIGKILL) and
// started again, then the node that leads it. Every task ends done within
// the deadline (none lost, the board services of the nodes left take
// over), and each exactly once: the board published one transition to
// done per task (counted over a subscription on every node), and no task
// used more claims than it allows.
func TestBoardPlanSurvivesANodeLoss(t *testing.T) {
	needHealthy(t)
	nc, op := operatorClient(t)
	js := op.JetStream()
	cl := board.NewOperatorClient(nc)
	plan := fmt.Sprintf("survive-%d", time.Now().Unix())
	events := watchBoardEvents(t, plan)

	const chains, depth = 12, 5
	var specs []protocol.BoardTaskSpec
	for i := range chains * depth {
		s := protocol.BoardTaskSpec{
			ID:      fmt.Sprintf("t%02d", i),
			Run:     []string{"/flock-agent", "tool", "sleep", "2s"},
			Timeout: protocol.Duration(20 * time.Second),
		}
		if i%3 == 2 {
			s.Run = []string{"/flock-agent", "tool", "echo", s.ID}
		}
		if i >= chains {
			s.Needs = []string{fmt.Sprintf("t%02d", i-chains)}
		}
		specs = append(specs, s)
	}
	total := len(specs)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	start := time.Now()
	changes, err := cl.Apply(ctx, protocol.BoardPlan{Plan: plan, Tasks: specs})
	cancel()
	if err != nil || len(changes) != total {
		t.Fatalf("apply: %d changes, %v", len(changes), err)
	}

	// A node that does not lead the board's stream, killed early in the plan.
	waitDone(t, cl, plan, 4, time.Minute)
	lead := leader(t, js, protocol.BoardStream)
	other := lead%3 + 1
	done, _, _ := boardDone(cl, plan)
	// A transition published over a connection to a node as it dies is
	// lost (core NATS: at most once); the board's state is what counts, and
	// an event goes unheard only while a node is down.
	var losses [][2]time.Time
	killed := time.Now()
	killNode(t, other)
	t.Logf("killed node %d (node %d leads %s) with %d of %d tasks done, %s in", other, lead, protocol.BoardStream, done, total, killed.Sub(start).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	startNode(t, other)
	t.Logf("node %d healthy %s after its start", other, waitHealthy(t, other, 2*time.Minute).Round(time.Millisecond))
	losses = append(losses, [2]time.Time{killed.Add(-2 * time.Second), time.Now()})

	// Then the leader, with tasks still to run.
	lead = leader(t, js, protocol.BoardStream)
	done, _, _ = boardDone(cl, plan)
	if done >= total-chains {
		t.Fatalf("%d of %d tasks were done before the leader could be killed: the plan is too short to lose it mid-plan", done, total)
	}
	killed = time.Now()
	killNode(t, lead)
	next := leader(t, js, protocol.BoardStream)
	t.Logf("killed node %d (leader of %s) with %d of %d tasks done, %s in: node %d leads after %s",
		lead, protocol.BoardStream, done, total, killed.Sub(start).Round(time.Millisecond), next, time.Since(killed).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	startNode(t, lead)
	t.Logf("node %d healthy %s after its start", lead, waitHealthy(t, lead, 2*time.Minute).Round(time.Millisecond))
	losses = append(losses, [2]time.Time{killed.Add(-2 * time.Second), time.Now()})

	// Every task done: none lost.
	deadline := time.Now().Add(3 * time.Minute)
	var tasks []protocol.BoardTask
	for {
		done, tasks, err = boardDone(cl, plan)
		if err == nil && done == total {
			break
		}
		if time.Now().After(deadline) {
			var st []string
			for _, task := range tasks {
				if task.Status != protocol.BoardDone {
					st = append(st, fmt.Sprintf("%s=%s(%s %s)", task.ID, task.Status, task.Holder, task.Reason))
				}
			}
			t.Fatalf("%d of %d tasks done 3 minutes after the nodes came back (last error %v); not done: %v", done, total, err, st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second) // the last events on their way

	// Each exactly once.
	doneBy, distinct, heard := events.doneTransitions()
	var twice, unheard []string
	reclaimed := 0
	runs := map[string]int{}
	for _, task := range tasks {
		switch n := doneBy[task.ID]; {
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s (%d times)", task.ID, n))
		case n == 0 && !slices.ContainsFunc(losses, func(w [2]time.Time) bool { return !task.Updated.Before(w[0]) && !task.Updated.After(w[1]) }):
			unheard = append(unheard, task.ID)
		case n == 0:
			t.Logf("task %s: its transition to done (%s) was lost with a node going down", task.ID, task.Updated.Format(time.RFC3339Nano))
		}
		if task.Attempts > protocol.DefaultBoardAttempts || task.Attempts < 1 {
			t.Errorf("task %s done after %d claims: it allows %d", task.ID, task.Attempts, protocol.DefaultBoardAttempts)
		}
		if task.Attempts > 1 {
			reclaimed++
		}
		dirs, _ := filepath.Glob(filepath.Join(shared, "agents", "*", "tasks", "board-"+task.Key()+"-*"))
		runs[task.ID] = len(dirs)
	}
	sort.Strings(twice)
	if len(twice) > 0 {
		t.Errorf("tasks done more than once: %v", twice)
	}
	if len(unheard) > 0 {
		t.Errorf("no transition to done was heard for %d tasks, done while every node was up: %v", len(unheard), unheard)
	}
	ranTwice := []string{}
	for id, n := range runs {
		if n > 1 {
			ranTwice = append(ranTwice, fmt.Sprintf("%s×%d", id, n))
		}
	}
	sort.Strings(ranTwice)
	if len(ranTwice) == 0 {
		ranTwice = []string{"none"}
	}
	byHolder := map[string]int{}
	for _, task := range tasks {
		byHolder[task.Holder]++
	}
	t.Logf("%d tasks done in %s through two node losses: each done once (%d transitions heard, %d distinct); %d needed a second claim; started more than once: %s; done by %v",
		total, took.Round(time.Millisecond), heard, distinct, reclaimed, strings.Join(ranTwice, " "), byHolder)
}
