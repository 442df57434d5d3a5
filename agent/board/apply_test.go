package board_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A plan's tasks are created ready when they need nothing (or only done
// tasks) and blocked otherwise; applying the same file again changes
// nothing, not even a revision, and publishes no event.
func TestApplyCreatesThenChangesNothing(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	p := plan("build", prompt("a"), prompt("b", "a"), protocol.BoardTaskSpec{ID: "c", Run: []string{"make"}, Needs: []string{"a", "b"}, Labels: []string{"go"}})
	changes := e.apply(t, p)
	for id, want := range map[string]string{"a": protocol.BoardReady, "b": protocol.BoardBlocked, "c": protocol.BoardBlocked} {
		if c := changes[id]; c.Change != protocol.BoardCreated || c.Status != want {
			t.Errorf("%s: %+v, want created %s", id, c, want)
		}
	}
	b := e.status(t, "build", "b", protocol.BoardBlocked)
	if b.CreatedBy != protocol.OperatorUser || b.Reason != "waits for a" {
		t.Errorf("b: created by %q, reason %q", b.CreatedBy, b.Reason)
	}
	before := map[string]uint64{}
	for _, task := range must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "build")) {
		before[task.ID] = task.Revision
	}
	events := listen(t, e.nc, protocol.SubjectBoardEvents)
	again := e.apply(t, p)
	if len(again) != 3 {
		t.Fatalf("changes %v", again)
	}
	for id, c := range again {
		if c.Change != protocol.BoardUnchanged {
			t.Errorf("re-apply: %s %+v", id, c)
		}
	}
	for _, task := range must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "build")) {
		if task.Revision != before[task.ID] {
			t.Errorf("re-apply wrote %s (revision %d, was %d)", task.ID, task.Revision, before[task.ID])
		}
	}
	select {
	case m := <-events:
		t.Fatalf("re-apply published %s", m.Subject)
	case <-time.After(50 * time.Millisecond):
	}
}

// Editing a plan: tasks not started yet take the file's spec (their status
// worked out again), started ones are kept and say why, tasks the file no
// longer has are cancelled when not started and kept otherwise, and a
// removed task put back is revived.
func TestApplyEditSemantics(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1 := e.agent(t, "agent-1")
	e.apply(t, plan("p", prompt("a"), prompt("b", "a"), prompt("c"), prompt("d"), prompt("e"), prompt("f")))
	claim(t, a1, "p", "a")
	a2 := e.agent(t, "agent-2")
	claim(t, a2, "p", "e")
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "e", protocol.BoardResult{Summary: "ok"}))

	edited := plan("p",
		protocol.BoardTaskSpec{ID: "a", Prompt: "something else"},             // claimed: kept
		protocol.BoardTaskSpec{ID: "b", Prompt: "do b"},                       // blocked, needs dropped: ready
		protocol.BoardTaskSpec{ID: "c", Prompt: "do c", Needs: []string{"a"}}, // ready, now needs a: blocked
		protocol.BoardTaskSpec{ID: "e", Prompt: "redo e"},                     // done: kept
		prompt("g"), // new
		// d and f removed: both ready, cancelled
	)
	got := e.apply(t, edited)
	want := map[string][2]string{
		"a": {protocol.BoardKept, protocol.BoardClaimed}, "b": {protocol.BoardUpdated, protocol.BoardReady},
		"c": {protocol.BoardUpdated, protocol.BoardBlocked}, "e": {protocol.BoardKept, protocol.BoardDone},
		"g": {protocol.BoardCreated, protocol.BoardReady}, "d": {protocol.BoardRemoved, protocol.BoardCancelled},
		"f": {protocol.BoardRemoved, protocol.BoardCancelled},
	}
	if len(got) != len(want) {
		t.Fatalf("changes %v", got)
	}
	for id, w := range want {
		if c := got[id]; c.Change != w[0] || c.Status != w[1] {
			t.Errorf("%s: %+v, want %s %s", id, c, w[0], w[1])
		}
	}
	if why := got["a"].Why; !strings.Contains(why, "claimed by agent-1") {
		t.Errorf("a kept: why %q", why)
	}
	if why := got["e"].Why; !strings.Contains(why, "done") {
		t.Errorf("e kept: why %q", why)
	}
	if a := e.status(t, "p", "a", protocol.BoardClaimed); a.Prompt != "do a" {
		t.Errorf("a claimed task was edited: %q", a.Prompt)
	}
	if d := e.status(t, "p", "d", protocol.BoardCancelled); d.Reason != "removed from the plan" {
		t.Errorf("d: reason %q", d.Reason)
	}
	if b := e.status(t, "p", "b", protocol.BoardReady); len(b.Needs) != 0 {
		t.Errorf("b: needs %v", b.Needs)
	}
	// Applying the edited file again changes nothing.
	for id, c := range e.apply(t, edited) {
		if c.Change != protocol.BoardUnchanged && c.Change != protocol.BoardKept {
			t.Errorf("re-apply of the edited plan: %s %+v", id, c)
		}
	}
	// The claimed task removed from the file is kept, the blocked one is
	// cancelled; d, put back, is revived.
	got = e.apply(t, plan("p", prompt("b"), prompt("d"), prompt("e"), prompt("g")))
	if c := got["c"]; c.Change != protocol.BoardRemoved || c.Status != protocol.BoardCancelled {
		t.Errorf("c removed while blocked: %+v", c)
	}
	if c := got["a"]; c.Change != protocol.BoardKept || c.Status != protocol.BoardClaimed || !strings.Contains(c.Why, "not in the plan") {
		t.Errorf("a removed while claimed: %+v", c)
	}
	if c := got["d"]; c.Change != protocol.BoardUpdated || c.Status != protocol.BoardReady {
		t.Errorf("d put back: %+v", c)
	}
	if c := got["f"]; c.Task != "" {
		t.Errorf("f, cancelled and still removed, reported: %+v", c)
	}
}

// A plan with problems is refused whole: nothing is written, and the error
// names every problem by its field.
func TestApplyRefusesABadPlanWhole(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	bad := plan("p",
		prompt("a", "b"), prompt("b", "a"), // a cycle
		prompt("c", "nope"),             // an unknown need
		protocol.BoardTaskSpec{ID: "d"}, // neither run nor prompt
		prompt("a"),                     // a duplicate
		protocol.BoardTaskSpec{ID: "e", Prompt: "x", Labels: []string{"GPU"}, Timeout: protocol.Duration(-time.Second)},
	)
	_, err := e.op.Apply(ctxT(t), bad)
	be := refused(t, err, protocol.BoardErrInvalid)
	for _, want := range []string{"a -> b -> a", `tasks[2].needs[0]: "nope" is not a task of the plan`, "tasks[3]: has neither", `tasks[4].id: "a" is also tasks[0]'s ID`, "tasks[5].labels[0]", "tasks[5].timeout"} {
		if !strings.Contains(be.Msg, want) {
			t.Errorf("error does not say %q:\n%s", want, be.Msg)
		}
	}
	if tasks := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "")); len(tasks) != 0 {
		t.Fatalf("a refused plan wrote %v", ids(tasks))
	}
	_, err = e.op.Apply(ctxT(t), protocol.BoardPlan{Tasks: []protocol.BoardTaskSpec{prompt("a")}})
	refused(t, err, protocol.BoardErrInvalid)
	// Agents do not apply plans.
	_, err = e.agent(t, "agent-1").Apply(ctxT(t), plan("p", prompt("a")))
	refused(t, err, protocol.BoardErrForbidden)
}

// Subtasks agents added are not the file's: applying the file again leaves
// them as they are.
func TestApplyLeavesSubtasks(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	p := plan("p", prompt("a"))
	e.apply(t, p)
	claim(t, a1, "p", "a")
	must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", prompt("sub")))
	changes := e.apply(t, p)
	if len(changes) != 1 || changes["a"].Change != protocol.BoardUnchanged {
		t.Fatalf("changes %v", changes)
	}
	e.status(t, "p", "agent-1/sub", protocol.BoardReady)
}
