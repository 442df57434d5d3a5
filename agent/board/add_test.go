package board_test

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

// An agent adds subtasks under a task it holds: in the same plan, in its
// own namespace (agent-1/<id>), needing tasks of the plan; prompt tasks for
// anyone, run tasks for itself only; within its quota.
func TestAddSubtasks(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", prompt("a"), prompt("b"), prompt("later", "b")))
	claim(t, a1, "p", "a")

	sub := must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", protocol.BoardTaskSpec{ID: "a-1", Prompt: "part one", Assignee: "agent-2"}))
	if sub.ID != "agent-1/a-1" || sub.Status != protocol.BoardReady || sub.Parent != "a" || sub.CreatedBy != "agent-1" || sub.Plan != "p" || sub.Key() != "p.agent-1/a-1" {
		t.Fatalf("subtask %+v", sub)
	}
	blocked := must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", protocol.BoardTaskSpec{ID: "agent-1/a-2", Run: []string{"go", "test"}, Assignee: "agent-1", Needs: []string{"agent-1/a-1", "later"}}))
	if blocked.ID != "agent-1/a-2" || blocked.Status != protocol.BoardBlocked {
		t.Fatalf("subtask with needs: %+v", blocked)
	}
	// The operator's IDs are not the agent's to take: "b" and "next" (one
	// the plan may use later) are agent-1/b and agent-1/next, and p.b is
	// the operator's as it was.
	for _, id := range []string{"b", "next"} {
		if got := must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", prompt(id))); got.ID != "agent-1/"+id {
			t.Fatalf("add %s: %+v", id, got)
		}
	}
	if b := e.show(t, "p", "b"); b.CreatedBy != protocol.OperatorUser || b.Prompt != "do b" {
		t.Fatalf("the operator's b after agent-1 added its b: %+v", b)
	}
	for _, c := range []struct {
		name, under string
		spec        protocol.BoardTaskSpec
		code, says  string
	}{
		{"a run task for another agent", "a", protocol.BoardTaskSpec{ID: "x", Run: []string{"rm", "-rf", "/"}, Assignee: "agent-2"}, protocol.BoardErrForbidden, "only the operator"},
		{"a run task for anyone", "a", protocol.BoardTaskSpec{ID: "x", Run: []string{"true"}}, protocol.BoardErrForbidden, "assigned to itself"},
		{"under a task it does not hold", "b", prompt("x"), protocol.BoardErrNotHolder, "not held by agent-1"},
		{"under no task", "zz", prompt("x"), protocol.BoardErrNotFound, "no task p.zz"},
		{"an ID it took", "a", prompt("a-1"), protocol.BoardErrInvalid, "task p.agent-1/a-1 already exists"},
		{"another agent's namespace", "a", prompt("agent-2/x"), protocol.BoardErrForbidden, `"agent-2/x" is not in agent-1's namespace`},
		{"a namespace in a namespace", "a", prompt("agent-1/agent-2/x"), protocol.BoardErrInvalid, "tasks[0].id: must match"},
		{"itself as a need", "a", prompt("x", "agent-1/x"), protocol.BoardErrInvalid, "a task cannot need itself"},
		{"a need not in the plan", "a", prompt("x", "nope"), protocol.BoardErrInvalid, `"nope" is not a task of plan p`},
		{"a bad spec", "a", protocol.BoardTaskSpec{ID: "x"}, protocol.BoardErrInvalid, "neither run nor prompt"},
	} {
		_, err := a1.Add(ctxT(t), "p", c.under, c.spec)
		if be := refused(t, err, c.code); !strings.Contains(be.Msg, c.says) {
			t.Errorf("%s: %q does not say %q", c.name, be.Msg, c.says)
		}
	}
	// The operator does not add: it applies.
	_, err := e.op.Add(ctxT(t), "p", "a", prompt("y"))
	refused(t, err, protocol.BoardErrForbidden)
	// agent-2 sees the task assigned to it, and takes it.
	if got := claim(t, a2, "p", "agent-1/a-1"); got.ID != "agent-1/a-1" {
		t.Fatalf("agent-2 claimed %+v", got)
	}
	if tasks := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p")); len(tasks) != 7 {
		t.Fatalf("tasks %v", ids(tasks))
	}
}

// Adds past the quota (counted over every plan) are refused.
func TestAddQuota(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.setBoard(t, func(c *protocol.BoardConfig) { setAgent(c, protocol.BoardAgent{ID: "agent-1", AddQuota: quota(3)}) })
	e.apply(t, plan("p", prompt("a")))
	e.apply(t, plan("q", prompt("a")))
	claim(t, a1, "p", "a")
	for _, id := range []string{"s1", "s2"} {
		must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", prompt(id)))
	}
	must[*protocol.BoardTask](t)(a1.Release(ctxT(t), "p", "a", ""))
	claim(t, a1, "q", "a")
	must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "q", "a", prompt("s3")))
	for i := range 20 { // a flood
		_, err := a1.Add(ctxT(t), "q", "a", prompt("flood-"+string(rune('a'+i))))
		refused(t, err, protocol.BoardErrLimit)
	}
	if n := len(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), ""))); n != 5 {
		t.Fatalf("%d tasks on the board, want 5", n)
	}
}

// A quota of 0 (flock:board.addQuota: 0) is none at all, not the default.
func TestAddQuotaZeroIsNone(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.setBoard(t, func(c *protocol.BoardConfig) { setAgent(c, protocol.BoardAgent{ID: "agent-1", AddQuota: quota(0)}) })
	e.apply(t, plan("p", prompt("a")))
	claim(t, a1, "p", "a")
	_, err := a1.Add(ctxT(t), "p", "a", prompt("s1"))
	refused(t, err, protocol.BoardErrLimit)
}
