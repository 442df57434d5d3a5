package board_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// conn is an agent's connection that records the server's refusals.
type conn struct {
	*nats.Conn
	errs chan error
}

func dial(t *testing.T, e *env, user string) *conn {
	t.Helper()
	c := &conn{errs: make(chan error, 64)}
	c.Conn = e.f.Connect(t, user, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs <- err }))
	return c
}

// denied asserts the server refused what (publish, subscription) on subject.
func (c *conn) denied(t *testing.T, what, subject string) {
	t.Helper()
	_ = c.Flush()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), what) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-timeout:
			t.Fatalf("the server did not refuse %s on %q", what, subject)
		}
	}
}

// The caller is the subject's, and the bus lets an agent publish only on
// its own: agent-1 cannot ask as agent-2 or as the operator, write the
// board's bucket, or watch the board's events.
func TestAnAgentIsItselfOnly(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	e.apply(t, plan("p", prompt("a")))
	c := dial(t, e, "agent-1")

	_, err := c.Request(protocol.BoardAgentSubject("agent-2", protocol.BoardOpClaim), []byte(`{"v":1}`), 300*time.Millisecond)
	if err == nil {
		t.Fatal("agent-1 was answered as agent-2")
	}
	c.denied(t, "publish", "board.agent.agent-2.claim")
	_, _ = c.Request(protocol.BoardOperatorSubject(protocol.BoardOpApply), []byte(`{"v":1,"plan":"x","tasks":[{"id":"a","prompt":"x"}]}`), 300*time.Millisecond)
	c.denied(t, "publish", "board.operator.apply")
	if err := c.Publish("$KV."+protocol.BoardBucket+".p.a", []byte(`{"status":"done"}`)); err != nil {
		t.Fatal(err)
	}
	c.denied(t, "publish", "$KV.FLOCK_BOARD.p.a")
	if _, err := c.SubscribeSync(protocol.SubjectBoardEvents); err != nil {
		t.Fatal(err)
	}
	c.denied(t, "subscription", "board.events.>")
	if _, err := c.SubscribeSync("$KV." + protocol.BoardBucket + ".>"); err != nil {
		t.Fatal(err)
	}
	c.denied(t, "subscription", "$KV.FLOCK_BOARD.>")
	e.status(t, "p", "a", protocol.BoardReady)
	if tasks := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "")); len(tasks) != 1 {
		t.Fatalf("board %v", ids(tasks))
	}
}

// The service answers only into the caller's own reply inboxes: an agent
// giving another subject as its reply (here agent-2's task subject, which
// the task stream stores) gets nothing sent there in the bus's name.
func TestRepliesGoOnlyToTheCallersInbox(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	js, err := e.nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	before, err := js.StreamInfo(protocol.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, e, "agent-1")
	for _, reply := range []string{protocol.TaskSubject("agent-2"), "_INBOX.agent-2.x", "_INBOX.operator.y"} {
		if err := c.PublishRequest(protocol.BoardAgentSubject("agent-1", protocol.BoardOpList), reply, []byte(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Flush()
	// Still serving: a proper request is answered.
	must[[]protocol.BoardTask](t)(e.agent(t, "agent-1").List(ctxT(t), ""))
	time.Sleep(50 * time.Millisecond)
	after, err := js.StreamInfo(protocol.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.State.Msgs {
		t.Fatalf("a board reply was stored on the task stream (%d messages, were %d)", after.State.Msgs, before.State.Msgs)
	}
}
