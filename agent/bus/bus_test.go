package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/bus"
	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// startTwoAgents starts a bus of two agents and connects the operator,
// agent-1 and agent-2 to it, each recording the server's refusals.
func startTwoAgents(t *testing.T) (f *bustest.Bus, op, a1, a2 *bustest.RecordedConn) {
	t.Helper()
	f = bustest.Start(t, bustest.Agents(2))
	return f, f.ConnectRecorded(t, protocol.OperatorUser), f.ConnectRecorded(t, "agent-1"), f.ConnectRecorded(t, "agent-2")
}

// listen subscribes (as a privileged watcher) and returns what arrives.
func listen(t *testing.T, nc *nats.Conn, subject string) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe(subject, ch); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return ch
}

// mailboxOf is agent id's mail as its agent takes it: pulled from the
// mailbox's consumer with the agent's own connection (what it may do),
// each message acknowledged and handed on with its headers.
func mailboxOf(t *testing.T, nc *nats.Conn, id string) chan *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cons, err := bustest.JetStream(t, nc).Consumer(ctx, protocol.MailStream(id), protocol.MailConsumer)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *nats.Msg, 64)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		ch <- &nats.Msg{Subject: m.Subject(), Data: m.Data(), Header: m.Headers()}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return ch
}

func nothing(t *testing.T, ch chan *nats.Msg, why string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("%s: got %s on %s", why, m.Data, m.Subject)
	case <-time.After(200 * time.Millisecond):
	}
}

func got(t *testing.T, ch chan *nats.Msg, why string) *nats.Msg {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(2 * time.Second):
		t.Fatalf("%s: nothing arrived", why)
	}
	return nil
}

func TestAgentPermissionsOnTheRealServer(t *testing.T) {
	t.Parallel()
	_, op, a1, a2 := startTwoAgents(t)

	t.Run("cannot publish as agent-2", func(t *testing.T) {
		for _, subj := range []string{protocol.ResultSubject("agent-2"), protocol.EventsSubject("agent-2"), protocol.HeartbeatSubject("agent-2")} {
			ch := listen(t, op.Conn, subj)
			_ = a1.Publish(subj, []byte("forged"))
			a1.Denied(t, "publish", subj)
			nothing(t, ch, "forged message delivered")
			// Control: agent-2 itself may.
			_ = a2.Publish(subj, []byte("real"))
			got(t, ch, "agent-2 on its own subject "+subj)
		}
		// ...and its own subjects work.
		ch := listen(t, op.Conn, protocol.HeartbeatSubject("agent-1"))
		_ = a1.Publish(protocol.HeartbeatSubject("agent-1"), []byte("{}"))
		got(t, ch, "agent-1's own heartbeat")
		a1.NoErrors(t, 100*time.Millisecond)
	})

	t.Run("sends only as itself", func(t *testing.T) {
		inbox := mailboxOf(t, a2.Conn, "agent-2")
		for _, as := range []string{"agent-2", protocol.OperatorUser, "agent-3"} {
			subj := protocol.InboxSubject("agent-2", as)
			_ = a1.Publish(subj, []byte("forged sender"))
			a1.Denied(t, "publish", subj)
			nothing(t, inbox, "a message agent-1 sent as "+as)
		}
		_ = op.Publish(protocol.InboxSubject("agent-2", "agent-1"), []byte("forged sender"))
		op.Denied(t, "publish", protocol.InboxSubject("agent-2", "agent-1"))
		nothing(t, inbox, "a message the operator sent as agent-1")
		// Control: each may send as itself, and the subject names it.
		_ = a1.Publish(protocol.InboxSubject("agent-2", "agent-1"), []byte("from agent-1"))
		if m := got(t, inbox, "agent-1 as itself"); m.Subject != "agent.agent-2.inbox.agent-1" {
			t.Fatalf("subject %s", m.Subject)
		}
		_ = op.Publish(protocol.InboxSubject("agent-2", protocol.OperatorUser), []byte("from the operator"))
		got(t, inbox, "the operator as itself")
		a1.NoErrors(t, 100*time.Millisecond)
		op.NoErrors(t, 100*time.Millisecond)
	})

	t.Run("replies only into reply inboxes", func(t *testing.T) {
		// A receipt goes to the sender's reply inbox. Asked to answer on
		// any other subject (a task subject, another agent's heartbeat, the
		// JetStream API), agent-1 is refused by the bus, even for a message
		// it received.
		mail := mailboxOf(t, a1.Conn, "agent-1")
		sent := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := mailbox.Send(ctx, a2.Conn, "agent-2", "agent-1", protocol.Message{ID: "hello", Body: "hello"}, 4*time.Second)
			if err == nil && (r.Status != protocol.ReceiptDelivered || r.File != "here") {
				err = fmt.Errorf("receipt %+v", r)
			}
			sent <- err
		}()
		m := got(t, mail, "agent-2's message")
		b, _ := json.Marshal(protocol.Receipt{V: 1, ID: "hello", To: "agent-1", From: "agent-2", Status: protocol.ReceiptDelivered, File: "here"})
		if err := a1.Publish(m.Header.Get(protocol.HeaderReceipt), b); err != nil {
			t.Fatal(err)
		}
		if err := <-sent; err != nil {
			t.Fatalf("agent-1's receipt into agent-2's reply inbox: %v", err)
		}
		a1.NoErrors(t, 100*time.Millisecond)
		for _, reply := range []string{protocol.TaskSubject("agent-2"), protocol.HeartbeatSubject("agent-2"), "$JS.API.STREAM.PURGE." + protocol.StreamTasks, "$KV.x.y", "$SYS.REQ.SERVER.PING"} {
			watch := listen(t, op.Conn, reply)
			if strings.HasPrefix(reply, "$") {
				watch = nil
			}
			msg := nats.NewMsg(protocol.InboxSubject("agent-1", "agent-2"))
			msg.Data = []byte("answer here")
			msg.Header.Set(protocol.HeaderReceipt, reply)
			if err := a2.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
			m := got(t, mail, "agent-2's message naming "+reply)
			_ = a1.Publish(m.Header.Get(protocol.HeaderReceipt), []byte("answer"))
			_ = a1.Flush()
			a1.Denied(t, "publish", reply)
			if watch != nil {
				nothing(t, watch, "agent-1's answer on "+reply)
			}
		}
	})

	t.Run("learns the roster and nothing more", func(t *testing.T) {
		m, err := a1.Request(protocol.SubjectRoster, nil, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.Roster
		if err := json.Unmarshal(m.Data, &r); err != nil || strings.Join(r.Agents, ",") != "agent-1,agent-2" {
			t.Fatalf("roster %s (%v)", m.Data, err)
		}
		for _, subj := range []string{protocol.SubjectHeartbeats, protocol.SubjectEvents, protocol.SubjectResults} {
			_, _ = a1.SubscribeSync(subj)
			a1.Denied(t, "subscription", subj)
		}
	})

	t.Run("cannot subscribe to agent-2's subjects, nor to the flock's spans", func(t *testing.T) {
		for _, subj := range []string{"agent.agent-2.>", protocol.InboxOf("agent-2"), protocol.InboxSubject("agent-2", "agent-1"), "agent.*.inbox.*", "agent.>", protocol.SpansSubject, ">"} {
			sub, _ := a1.SubscribeSync(subj)
			a1.Denied(t, "subscription", subj)
			_ = a2.Publish(protocol.EventsSubject("agent-2"), []byte("private"))
			_ = op.Publish(protocol.InboxSubject("agent-2", protocol.OperatorUser), []byte("for agent-2 only"))
			_ = op.Flush()
			if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
				t.Fatalf("agent-1 read %s on %s", m.Data, m.Subject)
			}
		}
	})

	t.Run("cannot take agent-2's mail", func(t *testing.T) {
		// Its mailbox's consumer, its stream (a direct get, a purge): all
		// refused. Control: agent-2 takes its own.
		_ = op.Publish(protocol.InboxSubject("agent-2", protocol.OperatorUser), []byte("for agent-2 only"))
		_ = op.Flush()
		mail := protocol.MailStream("agent-2")
		for _, subj := range []string{
			"$JS.API.CONSUMER.MSG.NEXT." + mail + "." + protocol.MailConsumer,
			"$JS.API.CONSUMER.INFO." + mail + "." + protocol.MailConsumer,
			"$JS.API.CONSUMER.CREATE." + mail,
			"$JS.API.DIRECT.GET." + mail,
			"$JS.API.STREAM.MSG.GET." + mail,
			"$JS.API.STREAM.PURGE." + mail,
		} {
			_, _ = a1.Request(subj, []byte(`{"batch":1,"seq":1}`), 300*time.Millisecond)
			a1.Denied(t, "publish", subj)
		}
		got(t, mailboxOf(t, a2.Conn, "agent-2"), "agent-2's own mail")
	})

	t.Run("cannot read agent-2's replies", func(t *testing.T) {
		for _, subj := range []string{protocol.InboxPrefix("agent-2") + ".>", "_INBOX.>", protocol.InboxPrefix(protocol.OperatorInboxToken) + ".>"} {
			sub, _ := a1.SubscribeSync(subj)
			a1.Denied(t, "subscription", subj)
			// agent-2 asks JetStream something; the answer goes to its inbox.
			js2 := bustest.JetStream(t, a2.Conn)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := js2.Consumer(ctx, protocol.StreamTasks, "agent-2")
			cancel()
			if err != nil {
				t.Fatalf("control: agent-2 reads its own consumer info: %v", err)
			}
			if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
				t.Fatalf("agent-1 read a reply meant for another user on %s", m.Subject)
			}
		}
	})

	t.Run("cannot publish broadcast or tasks", func(t *testing.T) {
		for _, subj := range []string{protocol.SubjectBroadcast, protocol.TaskSubject("agent-2"), protocol.SubjectTasksAll, protocol.SubjectTasksPool} {
			ch := listen(t, a2.Conn, protocol.SubjectBroadcast)
			_ = a1.Publish(subj, []byte("nope"))
			a1.Denied(t, "publish", subj)
			nothing(t, ch, "agent broadcast delivered")
		}
	})

	t.Run("cannot create consumers or use agent-2's", func(t *testing.T) {
		testkit.SkipInShort(t, "slow: each refused JetStream call waits out its timeout; make check runs it")
		js1 := bustest.JetStream(t, a1.Conn)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js1.CreateConsumer(ctx, protocol.StreamTasks, jetstream.ConsumerConfig{Durable: "sneaky", FilterSubject: protocol.TaskSubject("agent-2")})
		if err == nil {
			t.Fatal("agent-1 created a consumer")
		}
		jsop := bustest.JetStream(t, op.Conn)
		if _, err := jsop.Consumer(context.Background(), protocol.StreamTasks, "sneaky"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("consumer exists after a refused create: %v", err)
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel2()
		if _, err := js1.Consumer(ctx2, protocol.StreamTasks, "agent-2"); err == nil {
			t.Fatal("agent-1 read agent-2's consumer")
		}
		_ = a1.Publish("$JS.API.CONSUMER.MSG.NEXT."+protocol.StreamTasks+".agent-2", []byte(`{"batch":1}`))
		a1.Denied(t, "publish", "$JS.API.CONSUMER.MSG.NEXT."+protocol.StreamTasks+".agent-2")
		// Nor the pool: the bus hands pool tasks out, a slot's worth at a
		// time; pulling the pool directly took as many as an agent asked for.
		for _, api := range []string{"MSG.NEXT", "INFO"} {
			subj := "$JS.API.CONSUMER." + api + "." + protocol.StreamTasks + "." + protocol.ConsumerPool
			_ = a1.Publish(subj, []byte(`{"batch":50}`))
			a1.Denied(t, "publish", subj)
		}
		_ = a1.Publish("$JS.API.STREAM.PURGE."+protocol.StreamTasks, nil)
		a1.Denied(t, "publish", "$JS.API.STREAM.PURGE."+protocol.StreamTasks)
	})

	t.Run("cannot pull agent-2's tasks through its ack subjects", func(t *testing.T) {
		// +NXT on a consumer's ack subject asks it for the next message, to
		// the reply subject given. Crafted so that agent-1's own v2-layout
		// pattern matches it while agent-2's consumer's classic (9-token)
		// subscription does too, it pulled agent-2's tasks to agent-1.
		steal := listen(t, a1.Conn, protocol.InboxPrefix("agent-1")+".stolen")
		jsop := bustest.JetStream(t, op.Conn)
		if _, err := jsop.Publish(context.Background(), protocol.TaskSubject("agent-2"), []byte(`{"v":1,"id":"t-steal","kind":"echo"}`)); err != nil {
			t.Fatal(err)
		}
		for _, subj := range []string{
			"$JS.ACK." + protocol.StreamTasks + ".agent-2." + protocol.StreamTasks + ".agent-1.1.1.1",
			"$JS.ACK." + protocol.StreamTasks + ".agent-2.1.1.1.1.1",
			"$JS.ACK._.x." + protocol.StreamTasks + ".agent-2.1.1.1.1.1",
		} {
			msg := nats.NewMsg(subj)
			msg.Reply, msg.Data = protocol.InboxPrefix("agent-1")+".stolen", []byte("+NXT")
			_ = a1.PublishMsg(msg)
			a1.Denied(t, "publish", subj)
		}
		nothing(t, steal, "agent-2's task delivered to agent-1")
		// Control: agent-2 pulls it itself.
		js2 := bustest.JetStream(t, a2.Conn)
		cons, err := js2.Consumer(context.Background(), protocol.StreamTasks, "agent-2")
		if err != nil {
			t.Fatal(err)
		}
		mb, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range mb.Messages() {
			n++
			_ = m.Ack()
		}
		if n != 1 {
			t.Fatalf("agent-2 pulled %d of its own tasks, want 1", n)
		}
	})

	t.Run("operator cannot impersonate an agent", func(t *testing.T) {
		for _, subj := range []string{protocol.ResultSubject("agent-1"), protocol.HeartbeatSubject("agent-1"), protocol.EventsSubject("agent-1")} {
			_ = op.Publish(subj, []byte("forged"))
			op.Denied(t, "publish", subj)
		}
	})
}

// The agent's whole JetStream round trip with its own credentials: pull from
// its consumer (its own task, and a pool task the bus gave it there, whose
// headers name the pool task), progress, ack (the 2.15 ack subject format),
// and a result stored with a PubAck on its own reply inbox.
func TestAgentJetStreamRoundTripWithItsOwnCredentials(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(1))
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	a1 := f.ConnectRecorded(t, "agent-1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jsop := bustest.JetStream(t, op.Conn)
	js1 := bustest.JetStream(t, a1.Conn)
	cons, err := js1.Consumer(ctx, protocol.StreamTasks, "agent-1")
	if err != nil {
		t.Fatalf("bind agent-1: %v", err)
	}
	for _, subj := range []string{protocol.TaskSubject("agent-1"), protocol.SubjectTasksPool} {
		ack, err := jsop.Publish(ctx, subj, []byte(`{"v":1,"id":"x","kind":"echo"}`))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("pull the task sent to %s: %v", subj, err)
		}
		if !strings.HasPrefix(msg.Reply(), "$JS.ACK.") {
			t.Fatalf("ack subject %q", msg.Reply())
		}
		seq, _, isPool := protocol.PoolOrigin(msg.Headers().Get)
		if want := subj == protocol.SubjectTasksPool; isPool != want || (isPool && (seq != ack.Sequence || msg.Subject() != protocol.PoolTaskSubject("agent-1"))) {
			t.Fatalf("task sent to %s (seq %d) arrived on %s with pool headers %v", subj, ack.Sequence, msg.Subject(), msg.Headers())
		}
		if err := msg.InProgress(); err != nil {
			t.Fatal(err)
		}
		if _, err := js1.Publish(ctx, protocol.ResultSubject("agent-1"), []byte(`{"v":1}`)); err != nil {
			t.Fatalf("store result: %v", err)
		}
		if err := msg.DoubleAck(ctx); err != nil {
			t.Fatalf("ack (%s): %v", msg.Reply(), err)
		}
		info, err := jsop.Consumer(ctx, protocol.StreamTasks, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		if ci := info.CachedInfo(); ci.NumAckPending != 0 || ci.AckFloor.Stream == 0 {
			t.Fatalf("after ack: ack pending %d, ack floor %d", ci.NumAckPending, ci.AckFloor.Stream)
		}
	}
	a1.NoErrors(t, 100*time.Millisecond)
	// Interest retention: acked by the only interested consumer, the tasks are gone.
	s, _ := jsop.Stream(ctx, protocol.StreamTasks)
	if info, _ := s.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("task stream still holds %d acked tasks", info.State.Msgs)
	}
}

func TestMaxDeliveriesParksTaskOnDeadLetterStream(t *testing.T) {
	testkit.SkipInShort(t, "slow: waits out every redelivery; make check runs it")
	t.Parallel()
	cfg := bustest.Agents(2)
	cfg.Bus.AckWait, cfg.Bus.MaxDeliver = ptr("1s"), ptr(2)
	f := bustest.Start(t, cfg)
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	jsop := bustest.JetStream(t, op.Conn)
	direct, err := jsop.Publish(ctx, protocol.TaskSubject("agent-1"), []byte(`{"v":1,"id":"poison","kind":"echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	fanout, err := jsop.Publish(ctx, protocol.SubjectTasksAll, []byte(`{"v":1,"id":"fan","kind":"echo"}`))
	if err != nil {
		t.Fatal(err)
	}
	// agent-1 takes both twice and never acks (it "crashes" each time).
	js1 := bustest.JetStream(t, f.ConnectRecorded(t, "agent-1").Conn)
	cons, err := js1.Consumer(ctx, protocol.StreamTasks, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		b, err := cons.Fetch(2, jetstream.FetchMaxWait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range b.Messages() {
			n++
		}
		if n != 2 {
			t.Fatalf("fetched %d, want 2", n)
		}
	}
	// The agent keeps pulling, as a restarted agent does: the server gives
	// up on the tasks when it next tries to deliver them (nats-server
	// 2.15.2 does not report exhaustion while no pull request is waiting).
	if m, err := cons.Next(jetstream.FetchMaxWait(2500 * time.Millisecond)); err == nil {
		t.Fatalf("delivered a third time past max deliveries: %s", m.Data())
	}

	dead, err := jsop.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	var parked []*jetstream.RawStreamMsg
	for end := time.Now().Add(10 * time.Second); len(parked) < 2 && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		parked = parked[:0]
		for seq := uint64(1); seq <= 2; seq++ {
			if m, err := dead.GetMsg(ctx, seq); err == nil {
				parked = append(parked, m)
			}
		}
	}
	if len(parked) != 2 {
		t.Fatalf("%d tasks parked, want 2", len(parked))
	}
	seqs := map[string]bool{}
	for _, m := range parked {
		if m.Subject != protocol.DeadSubject("agent-1") ||
			!strings.Contains(m.Header.Get(protocol.HeaderDeadReason), "max deliveries") ||
			m.Header.Get(protocol.HeaderDeadDeliveries) != "2" || m.Header.Get(protocol.HeaderDeadConsumer) != "agent-1" {
			t.Fatalf("dead letter %s %v", m.Subject, m.Header)
		}
		seqs[m.Header.Get(protocol.HeaderOriginalSeq)+" "+m.Header.Get(protocol.HeaderOriginalSubject)] = true
	}
	if !seqs[itoa(direct.Sequence)+" tasks.agent-1"] || !seqs[itoa(fanout.Sequence)+" tasks.all"] {
		t.Fatalf("parked %v", seqs)
	}

	tasks, _ := jsop.Stream(ctx, protocol.StreamTasks)
	// The direct task is gone from the task stream (nobody else wants it)...
	if _, err := tasks.GetMsg(ctx, direct.Sequence); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("parked direct task still in %s: %v", protocol.StreamTasks, err)
	}
	// ...but the tasks.all one stays for agent-2, who has not run it yet.
	if _, err := tasks.GetMsg(ctx, fanout.Sequence); err != nil {
		t.Fatalf("tasks.all task taken away from agent-2: %v", err)
	}
	js2 := bustest.JetStream(t, f.ConnectRecorded(t, "agent-2").Conn)
	c2, _ := js2.Consumer(ctx, protocol.StreamTasks, "agent-2")
	m, err := c2.Next(jetstream.FetchMaxWait(3 * time.Second))
	if err != nil || string(m.Data()) != `{"v":1,"id":"fan","kind":"echo"}` {
		t.Fatalf("agent-2 did not get the tasks.all task: %v", err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestReloadAddsAndRemovesAgentsWithoutRestart(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	a1 := f.ConnectRecorded(t, "agent-1")
	if _, err := f.Dial(t, "agent-3"); err == nil {
		t.Fatal("agent-3 connected before it was added")
	}
	f.Rerender(t, bustest.Agents(3))
	a3 := f.ConnectRecorded(t, "agent-3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js3 := bustest.JetStream(t, a3.Conn)
	if _, err := js3.Consumer(ctx, protocol.StreamTasks, "agent-3"); err != nil {
		t.Fatalf("agent-3's consumer after reload: %v", err)
	}
	// agent-3 has exactly an agent's rights.
	_ = a3.Publish(protocol.HeartbeatSubject("agent-1"), nil)
	a3.Denied(t, "publish", protocol.HeartbeatSubject("agent-1"))
	if !a1.IsConnected() {
		t.Fatal("reload dropped agent-1's connection")
	}
	a1.NoErrors(t, 100*time.Millisecond)

	// Remove agent-2: its consumer goes, so interest retention no longer
	// keeps tasks.all tasks for it.
	f.Rerender(t, flock.Config{Target: "docker", Agents: []flock.AgentConfig{{ID: "agent-1"}, {ID: "agent-3"}}})
	jsop := bustest.JetStream(t, f.ConnectRecorded(t, protocol.OperatorUser).Conn)
	if _, err := jsop.Consumer(ctx, protocol.StreamTasks, "agent-2"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("removed agent's consumer: %v", err)
	}
	// Its results and its mailbox go too: they held their share of the store.
	for _, name := range []string{protocol.ResultsStream("agent-2"), protocol.MailStream("agent-2")} {
		if _, err := jsop.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("removed agent's stream %s: %v", name, err)
		}
	}
	if _, err := jsop.Stream(ctx, protocol.MailStream("agent-3")); err != nil {
		t.Fatalf("a remaining agent's mailbox: %v", err)
	}
	if _, err := f.Dial(t, "agent-2"); err == nil {
		t.Fatal("removed agent-2 can still connect")
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(1))
	host := strings.TrimPrefix(f.URL, "nats://")
	if err := bus.Probe(host, 2*time.Second); err != nil {
		t.Fatalf("probe of a running bus: %v", err)
	}
	// Something that is not NATS: accepts and says nothing.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			time.Sleep(3 * time.Second)
			c.Close()
		}
	}()
	if err := bus.Probe(l.Addr().String(), 500*time.Millisecond); err == nil {
		t.Fatal("probe passed on a silent port")
	}
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l2.Addr().String()
	l2.Close()
	if err := bus.Probe(addr, 500*time.Millisecond); err == nil {
		t.Fatal("probe passed on a closed port")
	}
}

func TestShutdownIsClean(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(1))
	nc := f.ConnectRecorded(t, "agent-1")
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	nc.SetReconnectHandler(nil)
	f.Bus.Shutdown()
	f.Bus.Shutdown() // twice is fine
	if err := bus.Probe(strings.TrimPrefix(f.URL, "nats://"), 500*time.Millisecond); err == nil {
		t.Fatal("bus still answers after Shutdown")
	}
	if nc.IsConnected() {
		time.Sleep(200 * time.Millisecond)
		if nc.IsConnected() {
			t.Fatal("client still connected after Shutdown")
		}
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// A hostile agent floods its own result subject far past its share of the
// store: only its own oldest results are evicted; another agent's stored
// result stays readable and it can still store new ones.
func TestResultsFloodEvictsOnlyTheFlooder(t *testing.T) {
	t.Parallel()
	cfg := bustest.Agents(2)
	share := 4
	cfg.Bus.ResultsMiBPerAgent = &share
	f := bustest.Start(t, cfg)
	a1, a2 := f.ConnectRecorded(t, "agent-1"), f.ConnectRecorded(t, "agent-2")
	js1 := bustest.JetStream(t, a1.Conn)
	js2 := bustest.JetStream(t, a2.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if _, err := js2.Publish(ctx, protocol.ResultSubject("agent-2"), []byte(`{"v":1,"task_id":"before","agent":"agent-2","status":"ok","subject":"tasks.agent-2","seq":1}`)); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 512<<10)
	for i := range junk {
		junk[i] = 'x'
	}
	sent := 0
	for ; sent < 4*share*2; sent++ { // twice its share
		if _, err := js1.Publish(ctx, protocol.ResultSubject("agent-1"), junk); err != nil {
			t.Fatalf("flood %d: %v", sent, err)
		}
	}
	if _, err := js2.Publish(ctx, protocol.ResultSubject("agent-2"), []byte(`{"v":1,"task_id":"after","agent":"agent-2","status":"ok","subject":"tasks.agent-2","seq":2}`)); err != nil {
		t.Fatalf("agent-2 cannot store a result after the flood: %v", err)
	}

	op := f.Connect(t, protocol.OperatorUser)
	jsop := bustest.JetStream(t, op)
	s1, err := jsop.Stream(ctx, protocol.ResultsStream("agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	st := s1.CachedInfo().State
	if st.Bytes > uint64(share)<<20 || st.Msgs == 0 || st.LastSeq != uint64(sent) {
		t.Fatalf("agent-1's stream after %d × 512 KiB: %d bytes in %d messages, last %d: want at most its %d MiB, keeping its newest", sent, st.Bytes, st.Msgs, st.LastSeq, share)
	}
	cl, err := operator.New(op)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.StoredResults(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var a2ids []string
	for _, r := range rs {
		if r.Agent == "agent-2" {
			a2ids = append(a2ids, r.TaskID)
		}
	}
	if strings.Join(a2ids, ",") != "before,after" {
		t.Fatalf("agent-2's stored results after agent-1's flood: %v", a2ids)
	}
	t.Logf("agent-1 sent %d MiB; its stream holds %d KiB in %d messages; agent-2 kept %v", sent/2, st.Bytes>>10, st.Msgs, a2ids)
}

// onEveryInterface starts a second bus of cfg's flock listening on every
// interface (the peer limits leave loopback alone) and returns the flock, that
// bus, this machine's non-loopback IPv4 address, its port and agent-1's
// credential.
func onEveryInterface(t *testing.T, cfg flock.Config) (f *bustest.Bus, b *bus.Server, ip, port string, nk nats.Option) {
	t.Helper()
	f = bustest.Start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := bus.Start(ctx, bus.Config{ConfigFile: f.ConfigFile, TopologyFile: f.TopologyFile, Host: "0.0.0.0", Port: -1, NoMonitor: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	_, port, _ = net.SplitHostPort(strings.TrimPrefix(b.ClientURL(), "nats://"))
	nk, err = nats.NkeyOptionFromSeed(f.SeedFile(t, "agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	return f, b, testkit.LocalIPv4(t), port, nk
}

// The bus reads no more than flock:bus.peerKiBps from one network peer: an
// agent pushing 2 MiB at it through its own address takes at least the time
// the bucket allows (burst 4 MiB is the floor, so the limit here is low and
// the push bigger), while the same push over loopback (not limited) does not.
func TestPeerByteRateIsBounded(t *testing.T) {
	testkit.SkipInShort(t, "slow: measures a rate over seconds; make check runs it")
	kib := 1024
	cfg := bustest.Agents(1)
	cfg.Bus.PeerKiBps = &kib
	_, _, ip, port, nk := onEveryInterface(t, cfg)
	push := func(host string) time.Duration {
		nc, err := nats.Connect("nats://"+net.JoinHostPort(host, port), nk, nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		chunk := make([]byte, 32<<10)
		const total = 6 << 20 // past the 4 MiB burst
		start := time.Now()
		for sent := 0; sent < total; sent += len(chunk) {
			if err := nc.Publish(protocol.EventsSubject("agent-1"), chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.FlushTimeout(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	limited, loopback := push(ip), push("127.0.0.1")
	t.Logf("6 MiB from %s (limited to %d KiB/s, burst 4 MiB): %s; over loopback: %s", ip, kib, limited.Round(time.Millisecond), loopback.Round(time.Millisecond))
	// (6 - 4) MiB at 1 MiB/s: at least 2 s.
	if limited < 1700*time.Millisecond {
		t.Errorf("6 MiB from one peer took %s: the %d KiB/s bound did not hold", limited, kib)
	}
	if loopback > limited/2 {
		t.Errorf("loopback took %s, limited %s: the control is no faster", loopback, limited)
	}
}

// The flock's services are read at no peer rate once the server accepted
// them: they answer every agent's board requests and do their own bucket
// work on one connection, which must not queue behind one peer's share.
// The same push from the same address as agent-1 is held to the rate; a
// client that names the services' key in its CONNECT without its seed is
// refused, never read at no rate.
func TestTheServicesLinkIsNotThrottled(t *testing.T) {
	testkit.SkipInShort(t, "slow: measures a rate over seconds; make check runs it")
	kib := 1024
	cfg := bustest.Agents(1)
	cfg.Bus.PeerKiBps = &kib
	f, _, ip, port, agent := onEveryInterface(t, cfg)
	services, err := nats.NkeyOptionFromSeed(f.SeedFile(t, protocol.ServicesUser))
	if err != nil {
		t.Fatal(err)
	}
	push := func(nk nats.Option, user, subject string) time.Duration {
		nc, err := nats.Connect("nats://"+net.JoinHostPort(ip, port), nk, nats.CustomInboxPrefix(protocol.InboxPrefix(user)))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		chunk := make([]byte, 32<<10)
		const total = 8 << 20 // past the 4 MiB burst
		start := time.Now()
		for sent := 0; sent < total; sent += len(chunk) {
			if err := nc.Publish(subject, chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.FlushTimeout(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	svc := push(services, protocol.ServicesUser, protocol.InboxPrefix(protocol.ServicesUser)+".nobody")
	limited := push(agent, "agent-1", protocol.EventsSubject("agent-1"))
	t.Logf("8 MiB from %s at a %d KiB/s peer rate: as the services %s, as agent-1 %s", ip, kib, svc.Round(time.Millisecond), limited.Round(time.Millisecond))
	if limited < 3500*time.Millisecond {
		t.Errorf("agent-1's 8 MiB took %s: the %d KiB/s bound did not hold (the control)", limited, kib)
	}
	if svc > limited/2 {
		t.Errorf("the services' 8 MiB took %s, agent-1's %s: the services' link is throttled", svc, limited)
	}
	// The services' public key with agent-1's signature: refused.
	pub := bustest.Key(t, protocol.ServicesUser).Public
	kp, err := nkeys.FromSeed([]byte(bustest.Key(t, "agent-1").Seed))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect("nats://"+net.JoinHostPort(ip, port), nats.Nkey(pub, kp.Sign), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a client with the services' public key and another's signature was accepted")
	}
}

// One peer holds at most its share of connections: the next is refused in
// the protocol's words while the operator (loopback here) and other peers
// still connect, and a connection closed makes room again.
func TestConnectionsPerPeerAreBounded(t *testing.T) {
	share := 3
	cfg := bustest.Agents(1)
	cfg.Bus.ConnectionsPerPeer = &share
	f, b, ip, port, nk := onEveryInterface(t, cfg)
	dial := func(host string) (*nats.Conn, error) {
		return nats.Connect("nats://"+net.JoinHostPort(host, port), nk, nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")),
			nats.NoReconnect(), nats.Timeout(3*time.Second))
	}
	var held []*nats.Conn
	defer func() {
		for _, nc := range held {
			nc.Close()
		}
	}()
	for i := 0; i < share; i++ {
		nc, err := dial(ip)
		if err != nil {
			t.Fatalf("connection %d of a share of %d refused: %v", i+1, share, err)
		}
		held = append(held, nc)
	}
	if nc, err := dial(ip); err == nil {
		nc.Close()
		t.Fatalf("connection %d from %s accepted past its share of %d", share+1, ip, share)
	} else if !strings.Contains(err.Error(), "maximum connections per peer exceeded") {
		t.Errorf("refused with %q, want the reason", err)
	}
	// Another peer (the operator, here over loopback) is not touched.
	opKey, err := nats.NkeyOptionFromSeed(f.SeedFile(t, protocol.OperatorUser))
	if err != nil {
		t.Fatal(err)
	}
	op, err := nats.Connect(b.ClientURL(), opKey, nats.NoReconnect())
	if err != nil {
		t.Fatalf("the operator cannot connect while agent-1 holds its share: %v", err)
	}
	op.Close()
	// A connection closed is room for the next.
	held[0].Close()
	held = held[1:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		nc, err := dial(ip)
		if err == nil {
			held = append(held, nc)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection closed did not make room: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
