package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// inboxBodies are the bodies of the messages in agent id's inbox directory,
// in the order the agent stored them (file names sort by time), once there
// are want of them.
func (e *env) inboxBodies(id string, want int, d time.Duration) []string {
	e.t.Helper()
	dir := filepath.Join(e.shared, "agents", id, "inbox")
	deadline := time.Now().Add(d)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*-inbox-*.json"))
		if len(files) >= want || time.Now().After(deadline) {
			sort.Strings(files)
			var bodies []string
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					e.t.Fatal(err)
				}
				var st struct{ Message protocol.Message }
				if err := json.Unmarshal(b, &st); err != nil {
					e.t.Fatalf("%s: %v", f, err)
				}
				bodies = append(bodies, st.Message.Body)
			}
			return bodies
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Mail to an agent that is down waits in its mailbox, across a restart of
// the bus, and reaches the agent, in order, when it comes back; each sender
// heard "queued", and a sender past its share of the mailbox is refused by
// name while another sender's share stays open.
func TestMailWaitsForAStoppedAgent(t *testing.T) {
	testkit.SkipInShort(t, "slow: restarts the bus; make check runs it")
	t.Parallel()
	f := bustest.Start(t, flockWith(2, nil))
	e := envOn(t, f, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	a1 := e.start("agent-1")
	if err := a1.stop(t); err != nil {
		t.Fatal(err)
	}
	// restartBus stops the bus and starts it again, and waits until the
	// operator's connection is back.
	restartBus := func() {
		t.Helper()
		f.Bus.Shutdown()
		f.RestartBus(t)
		testkit.WaitFor(t, 10*time.Second, "the operator's connection to come back", func() bool {
			return e.op.IsConnected() && e.op.FlushTimeout(time.Second) == nil
		})
	}
	ctx := t.Context()
	var want []string
	for i := range protocol.MailPerSender {
		body := fmt.Sprint("operator's message ", i)
		r, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: body}, 50*time.Millisecond)
		if err != nil || r.Status != protocol.ReceiptQueued || r.Seq == 0 || r.File != "" {
			t.Fatalf("message %d to a stopped agent: %+v %v; want queued", i, r, err)
		}
		want = append(want, body)
	}
	_, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: "one too many"}, 50*time.Millisecond)
	if !errors.Is(err, mailbox.ErrRefused) || !strings.Contains(err.Error(), fmt.Sprintf("the operator's own share of agent-1's mailbox is full (%d messages waiting", protocol.MailPerSender)) {
		t.Fatalf("the operator past its share: %v", err)
	}
	nc2 := e.f.Connect(t, "agent-2", nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if r, err := mailbox.Send(ctx, nc2, "agent-2", "agent-1", protocol.Message{Body: "agent-2's message"}, 50*time.Millisecond); err != nil || r.Status != protocol.ReceiptQueued {
		t.Fatalf("agent-2 while the operator's share is full: %+v %v; want queued", r, err)
	}
	want = append(want, "agent-2's message")

	// The operator hears agent-1's ready event only once it is back.
	restartBus()
	e.start("agent-1")
	got := e.inboxBodies("agent-1", len(want), 15*time.Second)
	if len(got) != len(want) {
		t.Fatalf("agent-1 stored %d of the %d messages that waited: %q", len(got), len(want), got)
	}
	// The operator's in the order sent; agent-2's anywhere among them.
	var ops []string
	for _, b := range got {
		if strings.HasPrefix(b, "operator's") {
			ops = append(ops, b)
		}
	}
	if strings.Join(ops, "|") != strings.Join(want[:protocol.MailPerSender], "|") {
		t.Fatalf("the operator's messages stored as %q, want %q", ops, want[:protocol.MailPerSender])
	}
	// Taken, the mailbox is empty: the operator's share is open again.
	if r, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: "and now"}, 5*time.Second); err != nil || r.Status != protocol.ReceiptDelivered {
		t.Fatalf("a message to the running agent: %+v %v; want delivered", r, err)
	}
	// The bus restarts under the running agent: its mail comes again once
	// it is back (queued meanwhile, then delivered).
	restartBus()
	r, err := e.cl.Send(ctx, "agent-1", protocol.Message{Body: "after the restart"}, 0)
	if err != nil || r.Status != protocol.ReceiptQueued {
		t.Fatalf("a message after the bus restarted: %+v %v", r, err)
	}
	if got := e.inboxBodies("agent-1", len(want)+2, 20*time.Second); len(got) != len(want)+2 || got[len(got)-1] != "after the restart" {
		t.Fatalf("the running agent did not take its mail after the bus restarted: %q", got)
	}
}

// A message queued for an agent that is down survives the loss of the bus
// node leading its mailbox: the agent, started after, stores every one.
func TestMailSurvivesANodeLoss(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	e := newClusterEnv(t, flockWith(2, nil))
	a1 := e.start("agent-1")
	if err := a1.stop(t); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 12
	for i := range n {
		r, err := e.cl.Send(ctx, "agent-1", protocol.Message{ID: fmt.Sprint("m-", i), Body: fmt.Sprint("message ", i)}, 0)
		if err != nil || r.Status != protocol.ReceiptQueued {
			t.Fatalf("message %d: %+v %v", i, r, err)
		}
	}
	leader := e.leaderOf(protocol.MailStream("agent-1"))
	e.f.Stop(t, leader)
	e.start("agent-1")
	got := e.inboxBodies("agent-1", n, 60*time.Second)
	if len(got) != n {
		t.Fatalf("after node %d (the mailbox's leader) went: %d of %d messages stored: %q", leader, len(got), n, got)
	}
	e.f.Restart(t, leader)
}

// agent-1 floods agent-2 with small messages, and agent-2's work takes
// none: agent-2 keeps agent-1's share of its inbox (protocol.InboxPerSender
// untaken), agent-1's next messages wait in the mailbox (its share there),
// and then the bus refuses agent-1, naming both bounds. The operator's
// message, sent first, is never pruned (INBOX_KEEP is 5 here), and the
// operator's next one is still delivered. Once agent-2 takes some of
// agent-1's, the ones waiting are stored.
func TestASendersFloodNeverPushesOutAnothersMail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, flockWith(2, nil))
	e.start("agent-2", func(c *worker.Config) { c.InboxKeep, c.InboxRate, c.InboxBytesRate = 5, 1000, 1<<30 })
	ctx := t.Context()
	ops, err := e.cl.Send(ctx, "agent-2", protocol.Message{Body: "the operator's"}, 5*time.Second)
	if err != nil || ops.Status != protocol.ReceiptDelivered {
		t.Fatalf("the operator's message: %+v %v", ops, err)
	}
	a1 := e.f.Connect(t, "agent-1")
	for i := range protocol.InboxPerSender {
		if r, err := mailbox.Send(ctx, a1, "agent-1", "agent-2", protocol.Message{Body: fmt.Sprint("flood ", i)}, 5*time.Second); err != nil || r.Status != protocol.ReceiptDelivered {
			t.Fatalf("agent-1's message %d: %+v %v; want delivered", i, r, err)
		}
	}
	for i := range protocol.MailPerSender {
		if r, err := mailbox.Send(ctx, a1, "agent-1", "agent-2", protocol.Message{Body: fmt.Sprint("waits ", i)}, 100*time.Millisecond); err != nil || r.Status != protocol.ReceiptQueued {
			t.Fatalf("agent-1's message %d past its inbox share: %+v %v; want queued", i, r, err)
		}
	}
	_, err = mailbox.Send(ctx, a1, "agent-1", "agent-2", protocol.Message{Body: "refused"}, 0)
	if !errors.Is(err, mailbox.ErrRefused) || !strings.Contains(err.Error(), fmt.Sprintf("already has %d messages from agent-1 waiting", protocol.MailPerSender)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("holds %d of its messages it has not taken", protocol.InboxPerSender)) {
		t.Fatalf("agent-1 past both shares: %v", err)
	}
	inbox := filepath.Join(e.shared, "agents", "agent-2", "inbox")
	if _, err := os.Stat(filepath.Join(e.shared, "agents", "agent-2", ops.File)); err != nil {
		t.Fatalf("the operator's untaken message is gone: %v", err)
	}
	if r, err := e.cl.Send(ctx, "agent-2", protocol.Message{Body: "the operator's second"}, 5*time.Second); err != nil || r.Status != protocol.ReceiptDelivered {
		t.Fatalf("the operator during agent-1's flood: %+v %v; want delivered", r, err)
	}
	// agent-2 takes ten of agent-1's: ten of those waiting are stored.
	files, _ := filepath.Glob(filepath.Join(inbox, "*-inbox-*.json"))
	took := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if took < 10 && strings.Contains(string(b), `"from": "agent-1"`) {
			if _, err := worker.TakeMessage(inbox, filepath.Base(f)); err != nil {
				t.Fatal(err)
			}
			took++
		}
	}
	testkit.WaitFor(t, 10*time.Second, "ten of agent-1's waiting messages stored", func() bool {
		waiting, _ := filepath.Glob(filepath.Join(inbox, "*-inbox-*.json"))
		return len(waiting) == 2+protocol.InboxPerSender
	})
	if taken, _ := filepath.Glob(filepath.Join(inbox, worker.TakenDir, "*.json")); len(taken) != 10 {
		t.Fatalf("%d taken files, want 10", len(taken))
	}
}
