package board_test

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// The caller is the subject's, and the bus lets an agent publish only on
// its own: agent-1 cannot ask as agent-2 or as the operator, write the
// board's bucket, or watch the board's events.
func TestAnAgentIsItselfOnly(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	e.apply(t, plan("p", prompt("a")))
	c := e.f.ConnectRecorded(t, "agent-1")

	_, err := c.Request(protocol.BoardAgentSubject("agent-2", protocol.BoardOpClaim), []byte(`{"v":1}`), 300*time.Millisecond)
	if err == nil {
		t.Fatal("agent-1 was answered as agent-2")
	}
	c.Denied(t, "publish", "board.agent.agent-2.claim")
	_, _ = c.Request(protocol.BoardOperatorSubject(protocol.BoardOpApply), []byte(`{"v":1,"plan":"x","tasks":[{"id":"a","prompt":"x"}]}`), 300*time.Millisecond)
	c.Denied(t, "publish", "board.operator.apply")
	if err := c.Publish("$KV."+protocol.BoardBucket+".p.a", []byte(`{"status":"done"}`)); err != nil {
		t.Fatal(err)
	}
	c.Denied(t, "publish", "$KV.FLOCK_BOARD.p.a")
	if _, err := c.SubscribeSync(protocol.SubjectBoardEvents); err != nil {
		t.Fatal(err)
	}
	c.Denied(t, "subscription", "board.events.>")
	if _, err := c.SubscribeSync("$KV." + protocol.BoardBucket + ".>"); err != nil {
		t.Fatal(err)
	}
	c.Denied(t, "subscription", "$KV.FLOCK_BOARD.>")
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
	c := e.f.ConnectRecorded(t, "agent-1")
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
