package bus_test

// What a hostile client with an agent's key cannot do to the bus through
// the protocol itself: answers sent where it says, subscriptions without end.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// JetStream answers a pull, an ack, an API call and a publish's ack on the
// request's reply subject through its own client, past every permission. A
// hostile agent gives a reply subject of another's: an API call (the answer
// was taken as a request to delete agent-2's mailbox), a stream's subject
// or a bucket's key (the answer was stored there). The bus refuses any
// reply outside the sender's own reply inbox, closes the connection, and
// nothing of the target changes.
func TestAnAgentsRepliesStayInItsOwnInbox(t *testing.T) {
	t.Parallel()
	f, op, _, a2 := startTwoAgents(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jsop := bustest.JetStream(t, op.Conn)
	if _, err := bustest.JetStream(t, a2.Conn).Publish(ctx, protocol.ResultSubject("agent-2"), []byte(`{"v":1,"id":"real"}`)); err != nil {
		t.Fatal(err)
	}
	ledger, err := jsop.KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Put(ctx, "agent-2", []byte(`{"v":1,"agent":"agent-2","spent":7}`)); err != nil {
		t.Fatal(err)
	}

	// What agent-1 may publish on, each answered by JetStream on the reply.
	mail, tasks := protocol.MailStream("agent-1"), protocol.StreamTasks
	asks := map[string]func(*nats.Conn, string) error{
		"a malformed pull of its own mailbox": func(nc *nats.Conn, reply string) error {
			return nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+mail+"."+protocol.MailConsumer, reply, []byte(`{"batch":"bad"}`))
		},
		"a pull of its own tasks": func(nc *nats.Conn, reply string) error {
			return nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+tasks+"."+protocol.AgentConsumer("agent-1"), reply, []byte(`{"batch":1,"no_wait":true}`))
		},
		"its own consumer's info": func(nc *nats.Conn, reply string) error {
			return nc.PublishRequest("$JS.API.CONSUMER.INFO."+tasks+"."+protocol.AgentConsumer("agent-1"), reply, nil)
		},
		"a result (the stream's ack)": func(nc *nats.Conn, reply string) error {
			return nc.PublishRequest(protocol.ResultSubject("agent-1"), reply, []byte(`{"v":1,"id":"x"}`))
		},
	}
	targets := []string{
		"$JS.API.STREAM.DELETE." + protocol.MailStream("agent-2"),
		"$JS.API.STREAM.PURGE." + protocol.ResultsStream("agent-2"),
		"$JS.API.CONSUMER.DELETE." + tasks + "." + protocol.AgentConsumer("agent-2"),
		"$KV." + protocol.LedgerBucket + ".agent-2",
		protocol.TaskSubject("agent-2"),
		protocol.InboxSubject("agent-2", protocol.OperatorUser),
		protocol.SubjectBroadcast,
		protocol.InboxPrefix("agent-2") + ".stolen",
	}
	for name, ask := range asks {
		for _, target := range targets {
			var lastErr error
			closed := make(chan struct{})
			nc, err := f.Dial(t, "agent-1", nats.NoReconnect(), nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")),
				nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { lastErr = err }),
				nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
			if err != nil {
				t.Fatal(err)
			}
			if err := ask(nc, target); err != nil {
				t.Fatalf("%s, reply %s: %v", name, target, err)
			}
			_ = nc.Flush()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s with the reply %s: the connection stayed open", name, target)
			}
			if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), "reply subject") {
				t.Errorf("%s with the reply %s: closed with %v (async %v), want the bus's reason", name, target, err, lastErr)
			}
		}
	}

	// Nothing of agent-2's changed.
	if _, err := jsop.Stream(ctx, protocol.MailStream("agent-2")); err != nil {
		t.Errorf("agent-2's mailbox: %v", err)
	}
	if _, err := jsop.Consumer(ctx, tasks, protocol.AgentConsumer("agent-2")); err != nil {
		t.Errorf("agent-2's task consumer: %v", err)
	}
	if s, err := jsop.Stream(ctx, protocol.ResultsStream("agent-2")); err != nil {
		t.Errorf("agent-2's results: %v", err)
	} else if info, err := s.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("agent-2's results hold %+v (%v), want its one result", info.State, err)
	}
	if e, err := ledger.Get(ctx, "agent-2"); err != nil || e.Revision() != 1 {
		t.Errorf("agent-2's ledger entry: %v (%v), want the first revision untouched", e, err)
	}
	for _, stream := range []string{tasks, protocol.MailStream("agent-2")} {
		s, err := jsop.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := s.Info(ctx, jetstream.WithSubjectFilter(">")); err != nil || info.State.Msgs != 0 {
			t.Errorf("%s holds %v (%v), want nothing", stream, info.State.Subjects, err)
		}
	}

	// The same asks with its own reply inbox work.
	nc := f.Connect(t, "agent-1")
	sub, err := nc.SubscribeSync(protocol.InboxPrefix("agent-1") + ".mine")
	if err != nil {
		t.Fatal(err)
	}
	for name, ask := range asks {
		if err := ask(nc, protocol.InboxPrefix("agent-1")+".mine"); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Errorf("%s with its own reply inbox: no answer: %v", name, err)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "agent-1 still connected", func() bool { return nc.IsConnected() })
}

// An agent subscribing to its own inbox without end would grow the bus's
// memory for everyone: past protocol.MaxSubscriptions on one connection
// the bus refuses each new subscription, saying so; those it holds still
// deliver, and agent-2 goes on.
func TestAnAgentsSubscriptionsAreBounded(t *testing.T) {
	t.Parallel()
	f, _, _, a2 := startTwoAgents(t)
	refused := make(chan error, 64)
	nc, err := f.Dial(t, "agent-1", nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case refused <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject := func(i int) string { return fmt.Sprintf("%s.s%d", protocol.InboxPrefix("agent-1"), i) }
	subs := map[int]*nats.Subscription{}
	for i := range protocol.MaxSubscriptions + 16 {
		if subs[i], err = nc.SubscribeSync(subject(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	select {
	case err := <-refused:
		if !errors.Is(err, nats.ErrMaxSubscriptionsExceeded) {
			t.Fatalf("the bus said %v, want maximum subscriptions exceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%d subscriptions on one connection: none refused", protocol.MaxSubscriptions+16)
	}
	for _, i := range []int{0, protocol.MaxSubscriptions - 1, protocol.MaxSubscriptions + 15} {
		if err := a2.Publish(subject(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_ = a2.Flush()
	for _, tc := range []struct {
		i    int
		want bool
	}{{0, true}, {protocol.MaxSubscriptions - 1, true}, {protocol.MaxSubscriptions + 15, false}} {
		_, err := subs[tc.i].NextMsg(time.Second)
		if (err == nil) != tc.want {
			t.Errorf("subscription %d: delivered %v, want %v", tc.i, err == nil, tc.want)
		}
	}
	if !nc.IsConnected() || !a2.IsConnected() {
		t.Fatal("a connection was lost")
	}
}

// A mailbox drops a message whose Nats-Msg-Id it stored in the last two
// minutes. agent-1 sends agent-2 a message carrying the ID the operator is
// about to use (its "operator:" form, as mailbox.Send writes it): the bus
// closes agent-1's connection, naming the rule, and stores nothing of it;
// the operator's message with that ID is then stored, not a duplicate.
func TestAnAgentCannotSquatAnotherSendersMessageID(t *testing.T) {
	t.Parallel()
	f, op, _, _ := startTwoAgents(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closed := make(chan struct{})
	nc, err := f.Dial(t, "agent-1", nats.NoReconnect(), nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	squat := nats.NewMsg(protocol.InboxSubject("agent-2", "agent-1"))
	squat.Data = []byte(`{"v":1,"id":"m-next","body":"squatted"}`)
	squat.Header.Set(jetstream.MsgIDHeader, protocol.MailMsgID(protocol.OperatorUser, "m-next"))
	if err := nc.PublishMsg(squat); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("agent-1's message with the operator's ID: the connection stayed open")
	}
	if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), `does not start with "agent-1:"`) {
		t.Errorf("closed with %v, want the bus's reason", err)
	}

	// Its own IDs pass.
	a1 := f.Connect(t, "agent-1")
	own := nats.NewMsg(protocol.InboxSubject("agent-2", "agent-1"))
	own.Data = []byte(`{"v":1,"id":"m-next","body":"agent-1's own"}`)
	if _, err := bustest.JetStream(t, a1).PublishMsg(ctx, own, jetstream.WithMsgID(protocol.MailMsgID("agent-1", "m-next"))); err != nil {
		t.Fatalf("agent-1's message with its own ID: %v", err)
	}
	ack, err := bustest.JetStream(t, op.Conn).PublishMsg(ctx, func() *nats.Msg {
		m := nats.NewMsg(protocol.InboxSubject("agent-2", protocol.OperatorUser))
		m.Data = []byte(`{"v":1,"id":"m-next","body":"the operator's"}`)
		return m
	}(), jetstream.WithMsgID(protocol.MailMsgID(protocol.OperatorUser, "m-next")))
	if err != nil || ack.Duplicate {
		t.Fatalf("the operator's message: %+v %v; want stored", ack, err)
	}
	s, err := bustest.JetStream(t, op.Conn).Stream(ctx, protocol.MailStream("agent-2"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx, jetstream.WithSubjectFilter(">")); err != nil || info.State.Msgs != 2 {
		t.Fatalf("agent-2's mailbox holds %v (%v), want agent-1's own and the operator's", info.State.Subjects, err)
	}
}
