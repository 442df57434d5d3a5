package board_test

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A claim takes the oldest ready task (the plan file's order), holds it
// under a lease (the board's, renewed by the holder), counts an attempt, and carries the
// results of the tasks it needs (without their prompts).
func TestClaimTakesTheOldestReadyWithItsContext(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", prompt("z"), prompt("y"), protocol.BoardTaskSpec{ID: "x", Prompt: "merge", Needs: []string{"z", "y"}, Timeout: protocol.Duration(time.Minute)}))
	z := claim(t, a1, "", "")
	if z.ID != "z" || z.Holder != "agent-1" || z.Attempts != 1 || z.Status != protocol.BoardClaimed || !z.LeaseUntil.Equal(e.clk.Now().Add(protocol.DefaultBoardLease)) || !z.ClaimedAt.Equal(e.clk.Now()) {
		t.Fatalf("first claim: %+v", z)
	}
	y := claim(t, a2, "", "")
	if y.ID != "y" {
		t.Fatalf("second claim took %s, want y", y.ID)
	}
	code := 0
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "z", protocol.BoardResult{Summary: "z says hi", Artifacts: []string{"z/out.txt"}, ExitCode: &code}))
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "y", protocol.BoardResult{Summary: "y says ho"}))
	rep, err := a1.Claim(ctxT(t), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Task.ID != "x" || !rep.Task.LeaseUntil.Equal(e.clk.Now().Add(protocol.DefaultBoardLease)) || !protocol.BoardDeadline(*rep.Task).Equal(e.clk.Now().Add(time.Minute)) || time.Duration(rep.Lease) != protocol.DefaultBoardLease {
		t.Fatalf("third claim: %+v", rep.Task)
	}
	if len(rep.Context) != 2 {
		t.Fatalf("context %+v", rep.Context)
	}
	got := map[string]protocol.BoardTask{}
	for _, c := range rep.Context {
		got[c.ID] = c
	}
	if got["z"].Result == nil || got["z"].Result.Summary != "z says hi" || got["z"].Result.Artifacts[0] != "z/out.txt" || got["y"].Result.Summary != "y says ho" {
		t.Errorf("context results: %+v", rep.Context)
	}
	if got["z"].Prompt != "" || got["z"].Status != protocol.BoardDone {
		t.Errorf("context carries %+v", got["z"])
	}
	// Nothing left: the code says so.
	_, err = a2.Claim(ctxT(t), "", "", "")
	refused(t, err, protocol.BoardErrNothing)
}

// What an agent may take: the kind it asks for, tasks assigned to it or to
// nobody, whose labels it all has; a named task must be ready; and never
// more than its claim limit at once. A task it may not see (for another, by
// assignee or labels) does not exist, for its claim as for show. The
// operator does not claim.
func TestClaimRules(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1 := e.agent(t, "agent-1")
	e.setBoard(t, func(c *protocol.BoardConfig) {
		setAgent(c, protocol.BoardAgent{ID: "agent-1", Labels: []string{"gpu"}, ClaimLimit: 2})
	})
	e.apply(t, plan("p",
		protocol.BoardTaskSpec{ID: "for-2", Prompt: "x", Assignee: "agent-2"},
		protocol.BoardTaskSpec{ID: "arm", Prompt: "x", Labels: []string{"arm"}},
		protocol.BoardTaskSpec{ID: "later", Prompt: "x", Needs: []string{"for-2"}},
		protocol.BoardTaskSpec{ID: "gpu-run", Run: []string{"nvidia-smi"}, Labels: []string{"gpu"}},
		protocol.BoardTaskSpec{ID: "mine", Prompt: "x", Assignee: "agent-1"},
		protocol.BoardTaskSpec{ID: "spare", Prompt: "x"},
	))
	_, err := a1.Claim(ctxT(t), "p", "for-2", "")
	refused(t, err, protocol.BoardErrNotFound)
	_, err = a1.Claim(ctxT(t), "p", "arm", "")
	refused(t, err, protocol.BoardErrNotFound)
	_, err = a1.Claim(ctxT(t), "p", "later", "")
	refused(t, err, protocol.BoardErrNotReady)
	_, err = a1.Claim(ctxT(t), "p", "nope", "")
	refused(t, err, protocol.BoardErrNotFound)
	_, err = a1.Claim(ctxT(t), "p", "gpu-run", protocol.BoardKindPrompt)
	refused(t, err, protocol.BoardErrForbidden)
	_, err = a1.Claim(ctxT(t), "", "spare", "")
	refused(t, err, protocol.BoardErrInvalid)
	_, err = a1.Claim(ctxT(t), "", "", "shell")
	refused(t, err, protocol.BoardErrInvalid)
	// By kind: the run task with the label it has.
	rep, err := a1.Claim(ctxT(t), "", "", protocol.BoardKindRun)
	if err != nil || rep.Task.ID != "gpu-run" {
		t.Fatalf("claim a run task: %v %+v", err, rep)
	}
	// Any kind: the oldest it may take, past the ones for others.
	if got := claim(t, a1, "", ""); got.ID != "mine" {
		t.Fatalf("claimed %s, want mine", got.ID)
	}
	// Two held, its limit: no third.
	_, err = a1.Claim(ctxT(t), "", "", "")
	refused(t, err, protocol.BoardErrLimit)
	e.status(t, "p", "spare", protocol.BoardReady)
	// The operator does not claim.
	_, err = e.op.Claim(ctxT(t), "", "", "")
	refused(t, err, protocol.BoardErrForbidden)
	// A claim in another plan only.
	e.apply(t, plan("q", prompt("only")))
	a2 := e.agent(t, "agent-2")
	if got := claim(t, a2, "q", ""); got.Plan != "q" || got.ID != "only" {
		t.Fatalf("claim in plan q: %+v", got)
	}
}
