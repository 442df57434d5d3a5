package board_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A plan is the operator's: an agent's subtask lives in its namespace, and
// a task an agent made under a plan's ID (only a board from before
// namespaces let one) is never taken for the plan's.

// legacy writes t into the bucket as the services would have, and its
// artifacts (name -> bytes, put by t's holder) into the store: a board
// left from before agents' subtasks had a namespace.
func (e *env) legacy(t *testing.T, task protocol.BoardTask, artifacts map[string]string) {
	t.Helper()
	js := bustest.JetStream(t, e.f.Connect(t, protocol.ServicesUser))
	kv, err := js.KeyValue(ctxT(t), protocol.BoardBucket)
	if err != nil {
		t.Fatal(err)
	}
	task.V, task.Created, task.Updated = protocol.Version, e.clk.Now(), e.clk.Now()
	data, _ := json.Marshal(task)
	if _, err := kv.Put(ctxT(t), task.Key(), data); err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctxT(t), protocol.ArtifactBucket)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range artifacts {
		meta := jetstream.ObjectMeta{Name: protocol.ArtifactObject(task.Plan, task.ID, name), Metadata: map[string]string{"flock-by": task.Holder}}
		if _, err := obj.Put(ctxT(t), meta, strings.NewReader(text)); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStatus(t, task.Plan, task.ID, task.Status)
}

// agent-1 squatted p.deploy on an old board (a subtask under the ID the
// operator's next version was to add) and completed it with a forged
// result; the operator's report, which needs deploy, was already on the
// board. The report never becomes ready on it, says why, and, were it
// ready, its claim carries no forged result and its holder gets no forged
// artifact. apply (and its dry run) refuses to adopt the squatted task,
// naming it and agent-1, and writes nothing.
func TestApplyAdoptsNoTaskAnAgentCreated(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a2 := e.agent(t, "agent-2")
	forged := &protocol.BoardResult{Summary: "deployed v1.2.3 to prod", Artifacts: []string{"release.txt"}}
	e.apply(t, plan("p", prompt("build"), prompt("report", "build")))
	e.legacy(t, protocol.BoardTask{Plan: "p", BoardTaskSpec: prompt("deploy"), Status: protocol.BoardDone, Holder: "agent-1",
		Result: forged, Parent: "build", CreatedBy: "agent-1", Attempts: 1}, map[string]string{"release.txt": "forged by agent-1"})
	// An old board's report, edited to need deploy (kept as it was) and
	// promoted on the squatted deploy; and one still blocked on it.
	e.legacy(t, protocol.BoardTask{Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "ship", Prompt: "ship it", Needs: []string{"deploy"}, Assignee: "agent-2"},
		Status: protocol.BoardReady, CreatedBy: protocol.OperatorUser}, nil)
	e.legacy(t, protocol.BoardTask{Plan: "p", BoardTaskSpec: protocol.BoardTaskSpec{ID: "notes", Prompt: "notes", Needs: []string{"deploy"}},
		Status: protocol.BoardBlocked, CreatedBy: protocol.OperatorUser}, nil)

	// The blocked one stays blocked (the sweep runs every 10 ms), and says why.
	time.Sleep(100 * time.Millisecond)
	if n := e.status(t, "p", "notes", protocol.BoardBlocked); n.Reason != "needs deploy, which agent-1 created, not the operator: it never counts as done" {
		t.Errorf("notes: %q", n.Reason)
	}
	// The ready one's claim carries no forged result, and its holder gets
	// no forged artifact: the squatted deploy is not the plan's deploy.
	rep, err := a2.Claim(ctxT(t), "p", "ship", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Context) != 0 {
		t.Errorf("ship's context: %+v", rep.Context)
	}
	_, _, err = a2.Get(ctxT(t), "p", "deploy", "release.txt")
	refused(t, err, protocol.BoardErrNotFound)

	// The next version of the file adds deploy: refused whole, by name.
	// (ship and notes, which the file no longer has, come last, oldest
	// first, then by key.)
	before := revisions(t, e, "p")
	next := plan("p", prompt("build"), protocol.BoardTaskSpec{ID: "deploy", Run: []string{"deploy", "v1.2.3"}, Assignee: "agent-2"},
		prompt("report", "build", "deploy"), prompt("new"))
	_, err = e.op.Apply(ctxT(t), next)
	be := refused(t, err, protocol.BoardErrForbidden)
	for _, want := range []string{"not applied", "tasks[1]: task p.deploy (done) was created by agent-1, not the operator: apply does not adopt it"} {
		if !strings.Contains(be.Msg, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, be.Msg)
		}
	}
	if after := revisions(t, e, "p"); !reflect.DeepEqual(after, before) {
		t.Errorf("a refused apply wrote: %v, was %v", after, before)
	}
	// The dry run says the same, with what else the apply would do.
	changes, err := e.op.DryRun(ctxT(t), next)
	if dbe := refused(t, err, protocol.BoardErrForbidden); dbe.Msg != be.Msg {
		t.Errorf("the dry run refuses %q, the apply %q", dbe.Msg, be.Msg)
	}
	want := []protocol.BoardChange{
		{Task: "build", Change: protocol.BoardUnchanged, Status: protocol.BoardReady},
		{Task: "deploy", Change: protocol.BoardRefused, Status: protocol.BoardDone, Why: "was created by agent-1, not the operator: apply does not adopt it"},
		{Task: "report", Change: protocol.BoardUpdated, Status: protocol.BoardBlocked},
		{Task: "new", Change: protocol.BoardCreated, Status: protocol.BoardReady},
		{Task: "notes", Change: protocol.BoardRemoved, Status: protocol.BoardCancelled},
		{Task: "ship", Change: protocol.BoardKept, Status: protocol.BoardClaimed, Why: "not in the plan any more, but claimed: kept"},
	}
	if !reflect.DeepEqual(changes, want) {
		t.Errorf("dry run:\n%+v\nwant\n%+v", changes, want)
	}
	if after := revisions(t, e, "p"); !reflect.DeepEqual(after, before) {
		t.Errorf("the dry run wrote: %v, was %v", after, before)
	}
	// Under another ID, the operator's deploy is applied.
	next.Tasks[1].ID, next.Tasks[2].Needs = "deploy-2", []string{"build", "deploy-2"}
	if c := e.apply(t, next); c["deploy-2"].Change != protocol.BoardCreated {
		t.Fatalf("the plan under another ID: %+v", c)
	}
}

// revisions is every task of plan by ID with its revision, as the bucket has it.
func revisions(t *testing.T, e *env, plan string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, task := range must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), plan)) {
		out[task.ID] = task.Revision
	}
	return out
}

// A dry run answers what the apply then does, change for change, and
// writes nothing: no revision, no event. A bad plan is refused as apply
// refuses it, and only the operator asks.
func TestDryRunIsTheApplyUnwritten(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", prompt("a"), prompt("b", "a"), prompt("c"), prompt("d"), prompt("e")))
	claim(t, a1, "p", "a")
	must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "a", prompt("sub")))
	claim(t, a2, "p", "e")
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "e", protocol.BoardResult{Summary: "ok"}))
	edited := plan("p",
		protocol.BoardTaskSpec{ID: "a", Prompt: "else"}, // claimed: kept
		prompt("b"),      // updated: ready
		prompt("c", "b"), // updated: blocked
		protocol.BoardTaskSpec{ID: "e", Prompt: "redo"}, // done: kept
		prompt("f"), // created
		// d: cancelled; agent-1/sub: not the file's, not reported
	)
	before := revisions(t, e, "p")
	events := listen(t, e.nc, protocol.SubjectBoardEvents)
	dry, err := e.op.DryRun(ctxT(t), edited)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-events:
		t.Fatalf("the dry run published %s", m.Subject)
	case <-time.After(50 * time.Millisecond):
	}
	if after := revisions(t, e, "p"); !reflect.DeepEqual(after, before) {
		t.Fatalf("the dry run wrote: %v, was %v", after, before)
	}
	applied := must[[]protocol.BoardChange](t)(e.op.Apply(ctxT(t), edited))
	if !reflect.DeepEqual(dry, applied) {
		t.Fatalf("dry run:\n%+v\napply:\n%+v", dry, applied)
	}
	kinds := map[string]string{}
	for _, c := range dry {
		kinds[c.Task] = c.Change
	}
	if !reflect.DeepEqual(kinds, map[string]string{"a": protocol.BoardKept, "b": protocol.BoardUpdated, "c": protocol.BoardUpdated,
		"e": protocol.BoardKept, "f": protocol.BoardCreated, "d": protocol.BoardRemoved}) {
		t.Fatalf("changes %v", kinds)
	}
	// Of a new plan: every task created, nothing written.
	dry = must[[]protocol.BoardChange](t)(e.op.DryRun(ctxT(t), plan("q", prompt("x"), prompt("y", "x"))))
	if len(dry) != 2 || dry[0].Change != protocol.BoardCreated || dry[1].Status != protocol.BoardBlocked {
		t.Fatalf("dry run of a new plan: %+v", dry)
	}
	_, err = e.op.Show(ctxT(t), "q", "x")
	refused(t, err, protocol.BoardErrNotFound)
	// A bad plan: apply's refusal, word for word.
	bad := plan("p", prompt("a", "b"), prompt("b", "a"), prompt("c", "agent-1/sub"))
	_, aerr := e.op.Apply(ctxT(t), bad)
	_, derr := e.op.DryRun(ctxT(t), bad)
	if ab, db := refused(t, aerr, protocol.BoardErrInvalid), refused(t, derr, protocol.BoardErrInvalid); ab.Msg != db.Msg || !strings.Contains(db.Msg, "a -> b -> a") {
		t.Fatalf("apply refuses %q, the dry run %q", ab.Msg, db.Msg)
	}
	_, err = a1.DryRun(ctxT(t), edited)
	refused(t, err, protocol.BoardErrForbidden)
}

// A dependent gets the artifacts of its need's holder, the one that
// completed it: not what an earlier holder (whose lease ran out, or who
// released it) left under the task.
func TestArtifactsOfAnEarlierHolderDoNotPassOn(t *testing.T) {
	t.Parallel()
	e := start(t, 3)
	a1, a2, a3 := e.agent(t, "agent-1"), e.agent(t, "agent-2"), e.agent(t, "agent-3")
	e.apply(t, plan("p", prompt("build"), prompt("test", "build")))
	claim(t, a1, "p", "build")
	must[*protocol.BoardArtifact](t)(a1.Put(ctxT(t), "p", "build", "out.bin", []byte("agent-1's")))
	must[*protocol.BoardTask](t)(a1.Release(ctxT(t), "p", "build", ""))
	claim(t, a2, "p", "build")
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "build", "log.txt", []byte("agent-2's")))
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "build", protocol.BoardResult{Artifacts: []string{"out.bin", "log.txt"}}))
	claim(t, a3, "p", "test")
	_, _, err := a3.Get(ctxT(t), "p", "build", "out.bin")
	refused(t, err, protocol.BoardErrNotFound)
	if got, _, err := a3.Get(ctxT(t), "p", "build", "log.txt"); err != nil || !bytes.Equal(got, []byte("agent-2's")) {
		t.Fatalf("the holder's artifact: %q %v", got, err)
	}
	// Its putter and the operator still get it.
	must[[]byte](t)(func() ([]byte, error) { b, _, err := a1.Get(ctxT(t), "p", "build", "out.bin"); return b, err }())
	must[[]byte](t)(func() ([]byte, error) { b, _, err := e.op.Get(ctxT(t), "p", "build", "out.bin"); return b, err }())
}

// An agent's subtask's artifacts are its own objects: agent-1/x's "a" is not
// task agent-1's "x/a", though both once made the name p/agent-1/x/a.
func TestASubtasksArtifactsAreItsOwn(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "agent-1", Prompt: "a task the operator named so", Assignee: "agent-2"},
		prompt("work"), prompt("after", "agent-1")))
	claim(t, a2, "p", "agent-1")
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "agent-1", "x/a", []byte("the operator's task's")))
	claim(t, a1, "p", "work")
	sub := must[*protocol.BoardTask](t)(a1.Add(ctxT(t), "p", "work", protocol.BoardTaskSpec{ID: "x", Prompt: "mine", Assignee: "agent-1"}))
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "work", protocol.BoardResult{}))
	claim(t, a1, "p", sub.ID)
	must[*protocol.BoardArtifact](t)(a1.Put(ctxT(t), "p", sub.ID, "a", []byte("agent-1's")))
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "agent-1", protocol.BoardResult{Artifacts: []string{"x/a"}}))
	for _, c := range []struct{ task, name, want string }{{"agent-1", "x/a", "the operator's task's"}, {"agent-1/x", "a", "agent-1's"}} {
		if got, _, err := e.op.Get(ctxT(t), "p", c.task, c.name); err != nil || string(got) != c.want {
			t.Errorf("%s's %s: %q %v, want %q", c.task, c.name, got, err, c.want)
		}
	}
	ts := must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p"))
	if got := ids(ts); !slices.Contains(got, "p.agent-1/x") || !slices.Contains(got, "p.agent-1") {
		t.Fatalf("tasks %v", got)
	}
}
