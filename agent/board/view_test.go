package board_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// The operator sees every task (by plan, by status); an agent sees the
// tasks it could take (labels, assignee), holds or added, and is told a
// task it may not see does not exist.
func TestWhoSeesWhat(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	e.setBoard(t, func(c *protocol.BoardConfig) {
		setAgent(c, protocol.BoardAgent{ID: "agent-1", Labels: []string{"gpu"}})
	})
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p",
		protocol.BoardTaskSpec{ID: "gpu", Prompt: "x", Labels: []string{"gpu"}},
		protocol.BoardTaskSpec{ID: "arm", Prompt: "x", Labels: []string{"arm"}},
		protocol.BoardTaskSpec{ID: "for-2", Prompt: "x", Assignee: "agent-2"},
		protocol.BoardTaskSpec{ID: "open", Prompt: "x"},
	))
	e.clk.Advance(time.Second)
	e.apply(t, plan("q", prompt("other")))
	e.clk.Advance(time.Second)
	claim(t, a2, "p", "for-2")
	must[*protocol.BoardTask](t)(a2.Add(ctxT(t), "p", "for-2", protocol.BoardTaskSpec{ID: "secret", Prompt: "x", Assignee: "agent-2"}))

	all := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), ""))
	if got := ids(all); !slices.Equal(got, []string{"p.gpu", "p.arm", "p.for-2", "p.open", "q.other", "p.agent-2/secret"}) {
		t.Fatalf("the operator sees %v", got)
	}
	if got := ids(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p", protocol.BoardClaimed, protocol.BoardDone))); !slices.Equal(got, []string{"p.for-2"}) {
		t.Fatalf("claimed or done in p: %v", got)
	}
	if got := ids(must[[]protocol.BoardTask](t)(a1.List(ctxT(t), ""))); !slices.Equal(got, []string{"p.gpu", "p.open", "q.other"}) {
		t.Fatalf("agent-1 sees %v", got)
	}
	if got := ids(must[[]protocol.BoardTask](t)(a2.List(ctxT(t), "p"))); !slices.Equal(got, []string{"p.for-2", "p.open", "p.agent-2/secret"}) {
		t.Fatalf("agent-2 sees %v", got)
	}
	for _, id := range []string{"arm", "for-2", "agent-2/secret", "secret", "nope"} {
		_, err := a1.Show(ctxT(t), "p", id)
		refused(t, err, protocol.BoardErrNotFound)
	}
	if got := must[*protocol.BoardTask](t)(a1.Show(ctxT(t), "p", "gpu")); got.ID != "gpu" || got.Prompt != "x" {
		t.Fatalf("agent-1 shows %+v", got)
	}
	_, err := e.op.List(ctxT(t), "", "finished")
	refused(t, err, protocol.BoardErrInvalid)
	_, err = e.op.Show(ctxT(t), "p", "")
	refused(t, err, protocol.BoardErrInvalid)
}

// Every transition is published on the task's event subject (the operator
// watches them); a task that becomes ready rings the bell agents hear.
func TestEventsAndTheReadyBell(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	events := listen(t, e.nc, protocol.SubjectBoardEvents)
	bell := listen(t, e.f.Connect(t, "agent-1"), protocol.SubjectBoardReady)
	e.apply(t, plan("p", prompt("a"), prompt("b", "a")))
	next := func(want string) protocol.BoardTask {
		t.Helper()
		subject, task := nextEvent(t, events, want)
		if subject != protocol.BoardEventSubject(task.Plan, task.ID) || task.Key()+" "+task.Status != want {
			t.Fatalf("event %s %s %s, want %s", subject, task.Key(), task.Status, want)
		}
		return task
	}
	ring := func() {
		t.Helper()
		select {
		case m := <-bell:
			if len(m.Data) != 0 {
				t.Fatalf("the bell carries %q", m.Data)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no ready bell")
		}
	}
	got := map[string]bool{}
	for range 2 { // written side by side: either order
		_, task := nextEvent(t, events, "of the apply")
		got[task.Key()+" "+task.Status] = true
	}
	if !got["p.a ready"] || !got["p.b blocked"] {
		t.Fatalf("apply events %v", got)
	}
	ring()
	claim(t, a1, "p", "a")
	next("p.a claimed")
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "a", protocol.BoardResult{}))
	next("p.a done")
	next("p.b ready")
	ring()
}

// nextEvent is the next board event on events, with its subject; the test
// fails if none comes within 2 s.
func nextEvent(t *testing.T, events chan *nats.Msg, what string) (string, protocol.BoardTask) {
	t.Helper()
	select {
	case m := <-events:
		var task protocol.BoardTask
		if err := json.Unmarshal(m.Data, &task); err != nil {
			t.Fatal(err)
		}
		return m.Subject, task
	case <-time.After(2 * time.Second):
		t.Fatalf("no event %s", what)
	}
	return "", protocol.BoardTask{}
}
