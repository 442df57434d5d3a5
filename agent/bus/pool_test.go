package bus_test

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// poolGrace shortens the pool's grace in f's topology and reloads the bus.
func poolGrace(t *testing.T, f *bustest.Bus, d time.Duration) {
	t.Helper()
	b, err := os.ReadFile(f.TopologyFile)
	if err != nil {
		t.Fatal(err)
	}
	var topo protocol.Topology
	if err := json.Unmarshal(b, &topo); err != nil {
		t.Fatal(err)
	}
	topo.Pool.Grace = protocol.Duration(d)
	if b, err = json.Marshal(topo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.TopologyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.Bus.Reload(ctx); err != nil {
		t.Fatal(err)
	}
}

// held is what one agent has been given and not acked.
type held struct {
	mu   sync.Mutex
	msgs map[uint64]jetstream.Msg // by pool seq
	at   map[uint64]time.Time     // when each was given
	max  int                      // the most it held at once: given within the last window
	keep time.Duration            // window: how long the bus lets it hold one (0: for ever)
}

// hoard is a hostile agent-1: it pulls as many tasks as it may ask for at once
// from its own consumer (the only one it may pull; the server refuses a batch
// over its slots), again and again, never runs or acks them and keeps each
// alive with +WPI, to sit on as much of the pool as it can.
func hoard(ctx context.Context, t *testing.T, js jetstream.JetStream, id string) *held {
	h := &held{msgs: map[uint64]jetstream.Msg{}, at: map[uint64]time.Time{}}
	cons, err := js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(id))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			batch, err := cons.Fetch(2, jetstream.FetchMaxWait(300*time.Millisecond))
			if err == nil {
				for m := range batch.Messages() {
					if seq, _, ok := protocol.PoolOrigin(m.Headers().Get); ok {
						h.mu.Lock()
						h.msgs[seq] = m
						now := time.Now()
						h.at[seq] = now
						// At once: the ones given within the window; one
						// given before it the bus has taken back by now
						// (its slot is free again), though the hoarder
						// never lets go of the message.
						held := 0
						for _, t := range h.at {
							if h.keep <= 0 || now.Sub(t) < h.keep {
								held++
							}
						}
						h.max = max(h.max, held)
						h.mu.Unlock()
					}
				}
			}
			h.mu.Lock()
			for _, m := range h.msgs {
				_ = m.InProgress()
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// answer is an honest agent: it answers every task it is given with a result
// naming the pool task, then acks it.
func answer(ctx context.Context, t *testing.T, js jetstream.JetStream, id string) {
	cons, err := js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(id))
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			var task protocol.Task
			_ = json.Unmarshal(m.Data(), &task)
			r := protocol.Result{V: 1, TaskID: task.ID, Agent: id, Status: protocol.StatusOK, Subject: m.Subject(), Nonce: task.Nonce}
			if seq, attempt, ok := protocol.PoolOrigin(m.Headers().Get); ok {
				r.Subject, r.Seq, r.Attempt = protocol.SubjectTasksPool, seq, attempt
			}
			b, _ := json.Marshal(r)
			if _, err := js.Publish(ctx, protocol.ResultSubject(id), b); err == nil {
				_ = m.Ack()
			}
		}
	}()
}

// A hostile agent that asks for tasks again and again and sits on them holds
// no more pool tasks than its slots, and each no longer than the task's
// timeout and the pool's grace: then the bus takes it back and an agent
// that works runs it. Before the bus handed the pool out, agent-1 pulled the
// shared pool consumer and took every task.
func TestPoolHoarderHoldsNoMoreThanItsSlotsNorLongerThanTheTimeout(t *testing.T) {
	testkit.SkipInShort(t, "slow: waits out the pool's deadline; make check runs it")
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2)) // 2 slots each
	const grace = time.Second
	poolGrace(t, f, grace)
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	jsop := bustest.JetStream(t, op.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	results := listen(t, op.Conn, protocol.SubjectResults)
	// The hoarder is alone for a moment: it is given what its slots take.
	// The bus takes a task back timeout + grace after giving it; then it may
	// give the hoarder another (under load, agent-2 may not have run them
	// all by then): at once is what was given within less than that.
	const n, timeout = 8, time.Second
	hoarder := hoard(ctx, t, bustest.JetStream(t, f.ConnectRecorded(t, "agent-1").Conn), "agent-1")
	hoarder.mu.Lock()
	hoarder.keep = timeout + grace - 300*time.Millisecond // the hoarder pulls every 300 ms at most
	hoarder.mu.Unlock()
	sent := map[uint64]time.Time{}
	for i := range n {
		task := protocol.Task{V: 1, ID: "p" + string(rune('a'+i)), Kind: protocol.KindEcho, Timeout: protocol.Duration(timeout), Nonce: "nonce"}
		b, _ := json.Marshal(task)
		ack, err := jsop.Publish(ctx, protocol.SubjectTasksPool, b)
		if err != nil {
			t.Fatal(err)
		}
		sent[ack.Sequence] = time.Now()
	}
	time.Sleep(500 * time.Millisecond)
	answer(ctx, t, bustest.JetStream(t, f.ConnectRecorded(t, "agent-2").Conn), "agent-2")

	done := map[uint64]protocol.Result{}
	var slowest time.Duration
	for len(done) < n {
		select {
		case m := <-results:
			var r protocol.Result
			if json.Unmarshal(m.Data, &r) != nil || r.Subject != protocol.SubjectTasksPool {
				continue
			}
			at, ok := sent[r.Seq]
			if !ok {
				t.Fatalf("a result for pool seq %d, which was never sent: %+v", r.Seq, r)
			}
			if m.Subject != protocol.ResultSubject("agent-2") {
				t.Fatalf("result from %s", m.Subject)
			}
			done[r.Seq] = r
			slowest = max(slowest, time.Since(at))
		case <-ctx.Done():
			t.Fatalf("%d of %d pool tasks answered", len(done), n)
		}
	}
	hoarder.mu.Lock()
	got, most := len(hoarder.msgs), hoarder.max
	hoarder.mu.Unlock()
	if got == 0 || most > 2 {
		t.Fatalf("the hoarder was given %d pool tasks, %d at once: want some, never more than its 2 slots", got, most)
	}
	taken := 0
	for seq := range hoarder.msgs {
		if done[seq].Attempt < 2 {
			t.Errorf("pool task %d was given to the hoarder, then answered by agent-2 at attempt %d: want 2 or more", seq, done[seq].Attempt)
		}
		taken++
	}
	// Given at once, held for the timeout and the grace, found by a sweep
	// (every 2 s), answered by agent-2: well under ten seconds.
	if limit := timeout + grace + 2*time.Second + 6*time.Second; slowest > limit {
		t.Errorf("the slowest pool task took %s: a task taken back should be answered within %s", slowest, limit)
	}
	// The hoarder's consumer no longer counts the taken-back copies.
	info, err := jsop.Consumer(ctx, protocol.StreamTasks, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hoarder given %d (at most %d at once), all taken back; 8 answered by agent-2, the slowest after %s; agent-1's consumer holds %d",
		taken, most, slowest.Round(time.Millisecond), info.CachedInfo().NumAckPending)
}

// A pool task no agent answers is given to at most maxDeliver agents (here
// the one hoarder, again and again), then parked on the dead-letter stream
// with the reason: never lost, never held for ever.
func TestPoolTaskNobodyAnswersIsParked(t *testing.T) {
	testkit.SkipInShort(t, "slow: waits out the pool's deadline for every agent; make check runs it")
	t.Parallel()
	cfg := bustest.Agents(1)
	two := 2
	cfg.Bus.MaxDeliver = &two
	f := bustest.Start(t, cfg)
	poolGrace(t, f, 500*time.Millisecond)
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	jsop := bustest.JetStream(t, op.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dead := listen(t, op.Conn, protocol.DeadSubject(protocol.ConsumerPool))
	hoard(ctx, t, bustest.JetStream(t, f.ConnectRecorded(t, "agent-1").Conn), "agent-1")
	b, _ := json.Marshal(protocol.Task{V: 1, ID: "never", Kind: protocol.KindEcho, Timeout: protocol.Duration(time.Second)})
	ack, err := jsop.Publish(ctx, protocol.SubjectTasksPool, b)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-dead:
		seq, attempt, ok := protocol.PoolOrigin(m.Header.Get)
		if !ok || seq != ack.Sequence || attempt != 2 || m.Header.Get(protocol.HeaderDeadReason) == "" {
			t.Fatalf("parked %s with headers %v: want pool seq %d at attempt 2 with a reason", m.Data, m.Header, ack.Sequence)
		}
		t.Logf("parked: %s", m.Header.Get(protocol.HeaderDeadReason))
	case <-ctx.Done():
		t.Fatal("the pool task nobody answers was never parked")
	}
	// Nothing of it is left in the task stream for anyone to hold.
	s, _ := jsop.Stream(ctx, protocol.StreamTasks)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task stream still holds %d messages", info.State.Msgs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An agent removed from the flock while it holds a pool task: the task is
// queued on the pool again and run by an agent that stays (interest
// retention would otherwise drop the copy with the agent's consumer).
func TestPoolTaskOfARemovedAgentIsGivenToAnother(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	jsop := bustest.JetStream(t, op.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	results := listen(t, op.Conn, protocol.SubjectResults)
	// Both sit on what they get; the one given the task is removed.
	hoarders, stop := map[string]*held{}, map[string]context.CancelFunc{}
	for _, id := range []string{"agent-1", "agent-2"} {
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hoarders[id], stop[id] = hoard(hctx, t, bustest.JetStream(t, f.ConnectRecorded(t, id).Conn), id), cancel
	}
	b, _ := json.Marshal(protocol.Task{V: 1, ID: "orphan", Kind: protocol.KindEcho})
	ack, err := jsop.Publish(ctx, protocol.SubjectTasksPool, b)
	if err != nil {
		t.Fatal(err)
	}
	holder, stays := "", ""
	for holder == "" {
		for id, h := range hoarders {
			h.mu.Lock()
			if _, ok := h.msgs[ack.Sequence]; ok {
				holder = id
			}
			h.mu.Unlock()
		}
		if ctx.Err() != nil {
			t.Fatal("no agent was given the pool task")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stays = map[string]string{"agent-1": "agent-2", "agent-2": "agent-1"}[holder]
	stop[stays]() // it answers from now on
	time.Sleep(400 * time.Millisecond)
	f.Rerender(t, flock.Config{Target: "docker", Agents: []flock.AgentConfig{{ID: stays}}})
	answer(ctx, t, bustest.JetStream(t, f.ConnectRecorded(t, stays).Conn), stays)
	for {
		select {
		case m := <-results:
			var r protocol.Result
			if json.Unmarshal(m.Data, &r) != nil || r.Seq != ack.Sequence || r.Subject != protocol.SubjectTasksPool {
				continue
			}
			if r.Agent != stays || r.Attempt < 2 {
				t.Fatalf("result %+v: want %s's, attempt 2 or more", r, stays)
			}
			t.Logf("%s removed while it held pool task %d; %s ran it at attempt %d", holder, ack.Sequence, stays, r.Attempt)
			return
		case <-ctx.Done():
			t.Fatal("the removed agent's pool task was never run")
		}
	}
}
