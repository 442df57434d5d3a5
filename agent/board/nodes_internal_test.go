package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// These tests run the service on a bare nats-server (no users, no
// permissions: the flock's bus is tested from board_test) to do what the
// bus would not let a test do: run two services with views of their own,
// as two bus nodes do, and write the bucket behind the services' backs, as
// a node that crashed mid-transition leaves it.

type bare struct {
	url string
	js  jetstream.JetStream
	kv  jetstream.KeyValue
}

func startBare(t *testing.T) *bare {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	b := &bare{url: ns.ClientURL()}
	b.js = b.jetstream(t, b.conn(t, "admin"))
	if b.kv, err = b.js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: protocol.BoardBucket, History: 1}); err != nil {
		t.Fatal(err)
	}
	return b
}

// conn connects as user, with the reply inboxes the bus gives that user.
func (b *bare) conn(t *testing.T, user string) *nats.Conn {
	t.Helper()
	token := user
	if user == protocol.OperatorUser {
		token = protocol.OperatorInboxToken
	}
	nc, err := nats.Connect(b.url, nats.CustomInboxPrefix(protocol.InboxPrefix(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (b *bare) jetstream(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// node starts a service on a connection of its own, as a bus node does.
func (b *bare) node(t *testing.T, opt Options) *Service {
	t.Helper()
	nc := b.conn(t, "admin")
	s, err := Serve(context.Background(), nc, b.jetstream(t, nc), protocol.BoardConfig{}, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Two nodes, each with its own view of the bucket, answer 50 agents that
// claim the one ready task at once: compare-and-set on the entry's revision
// lets exactly one win, round after round.
func TestTwoNodesGiveATaskOnce(t *testing.T) {
	t.Parallel()
	b := startBare(t)
	b.node(t, Options{})
	b.node(t, Options{})
	op := NewOperatorClient(b.conn(t, protocol.OperatorUser))
	clients := make([]*Client, 50)
	for i := range clients {
		id := fmt.Sprintf("agent-%d", i+1)
		clients[i] = NewAgentClient(b.conn(t, id), id)
	}
	for round := range 20 {
		p := fmt.Sprintf("r%d", round)
		if _, err := op.Apply(testCtx(t), protocol.BoardPlan{Plan: p, Tasks: []protocol.BoardTaskSpec{{ID: "prize", Prompt: "x"}}}); err != nil {
			t.Fatal(err)
		}
		_, errs := testkit.AtOnce(len(clients), func(i int) (*protocol.BoardReply, error) {
			return clients[i].Claim(testCtx(t), p, "", "")
		})
		winners, others := testkit.Refusals(t, errs)
		if len(winners) != 1 || others[protocol.BoardErrNothing] != 49 {
			t.Fatalf("round %d: winners %v, refusals %v", round, winners, others)
		}
		if _, err := clients[winners[0]].Complete(testCtx(t), p, "prize", protocol.BoardResult{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A node that completed a task and crashed before promoting its dependents
// leaves them blocked with every need done: the sweeper promotes them. An
// expired lease swept by two nodes at once moves once.
func TestTheSweeperRepairsAndMovesOnce(t *testing.T) {
	t.Parallel()
	b := startBare(t)
	clk := struct {
		sync.Mutex
		t time.Time
	}{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	now := func() time.Time { clk.Lock(); defer clk.Unlock(); return clk.t }
	b.node(t, Options{Now: now, SweepEvery: 5 * time.Millisecond})
	b.node(t, Options{Now: now, SweepEvery: 5 * time.Millisecond})
	watch := b.conn(t, "watcher")
	events := make(chan *nats.Msg, 64)
	if _, err := watch.ChanSubscribe(protocol.SubjectBoardEvents, events); err != nil {
		t.Fatal(err)
	}
	_ = watch.Flush()

	put := func(task protocol.BoardTask) {
		t.Helper()
		data, _ := json.Marshal(task)
		if _, err := b.kv.Put(testCtx(t), task.Key(), data); err != nil {
			t.Fatal(err)
		}
	}
	at := now()
	put(protocol.BoardTask{V: 1, Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "a", Prompt: "x"}, Status: protocol.BoardDone, CreatedBy: "operator", Created: at})
	put(protocol.BoardTask{V: 1, Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "b", Prompt: "x", Needs: []string{"a"}}, Status: protocol.BoardBlocked, CreatedBy: "operator", Created: at})
	put(protocol.BoardTask{V: 1, Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "c", Prompt: "x"}, Status: protocol.BoardClaimed, Holder: "agent-1", Attempts: 1,
		LeaseUntil: at.Add(time.Minute), CreatedBy: "operator", Created: at})

	op := NewOperatorClient(b.conn(t, protocol.OperatorUser))
	waitFor := func(id, status string) protocol.BoardTask {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			task, err := op.Show(testCtx(t), "p", id)
			if err == nil && task.Status == status {
				return *task
			}
			if time.Now().After(deadline) {
				t.Fatalf("p.%s is not %s: %+v %v", id, status, task, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("b", protocol.BoardReady)
	clk.Lock()
	clk.t = clk.t.Add(2 * time.Minute)
	clk.Unlock()
	if c := waitFor("c", protocol.BoardReady); !strings.HasPrefix(c.Reason, "lease expired: its holder agent-1 silent for ") || c.Holder != "" {
		t.Fatalf("c taken back: %+v", c)
	}
	time.Sleep(50 * time.Millisecond) // a dozen sweeps on each node
	moves := map[string]int{}
	for len(events) > 0 {
		m := <-events
		var task protocol.BoardTask
		_ = json.Unmarshal(m.Data, &task)
		moves[task.ID+" "+task.Status]++
	}
	if len(moves) != 2 || moves["b ready"] != 1 || moves["c ready"] != 1 {
		t.Fatalf("transitions published: %v", moves)
	}
}

// Stop answers the requests already taken, then stops; the connection is
// the caller's and stays open.
func TestStopDrains(t *testing.T) {
	t.Parallel()
	b := startBare(t)
	s := b.node(t, Options{})
	op := NewOperatorClient(b.conn(t, protocol.OperatorUser))
	if _, err := op.Apply(testCtx(t), protocol.BoardPlan{Plan: "p", Tasks: []protocol.BoardTaskSpec{{ID: "a", Prompt: "x"}}}); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop()
	_, err := op.List(testCtx(t), "")
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a stopped service answered: %v", err)
	}
	if s.nc.IsClosed() {
		t.Fatal("Stop closed the connection")
	}
}
