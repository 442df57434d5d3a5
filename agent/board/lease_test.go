package board_test

import (
	"sort"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

func keysOf(ts []protocol.BoardTask) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Key())
	}
	sort.Strings(out)
	return out
}

// An agent's runtime renews every claim its agent holds with one request
// (of one kind when its program is gone): the claims it renews stay, those
// it leaves out lapse within a lease, and another agent's claims are not
// its to renew.
func TestRenewAllKeepsAnAgentsClaimsAlive(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	e.setBoard(t, func(c *protocol.BoardConfig) {
		setAgent(c, protocol.BoardAgent{ID: "agent-1", ClaimLimit: 3})
	})
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "r", Run: []string{"true"}}, prompt("q1"), prompt("q2"), prompt("other")))
	for _, id := range []string{"r", "q1", "q2"} {
		claim(t, a1, "p", id)
	}
	claim(t, a2, "p", "other")

	e.clk.Advance(20 * time.Second)
	rep := must[*protocol.BoardReply](t)(a1.RenewAll(ctxT(t), ""))
	if got := keysOf(rep.Tasks); len(got) != 3 || got[0] != "p.q1" || got[1] != "p.q2" || got[2] != "p.r" || time.Duration(rep.Lease) != protocol.DefaultBoardLease {
		t.Fatalf("renew-all: %v, lease %s", got, time.Duration(rep.Lease))
	}
	for _, task := range rep.Tasks {
		if task.Prompt != "" || !task.LeaseUntil.Equal(e.clk.Now().Add(protocol.DefaultBoardLease)) {
			t.Fatalf("renewed: %+v", task)
		}
	}
	e.clk.Advance(20 * time.Second) // agent-2 silent for 40 s
	e.waitStatus(t, "p", "other", protocol.BoardReady)
	e.status(t, "p", "q1", protocol.BoardClaimed)

	// Its program gone, the runtime renews its run task only.
	rep = must[*protocol.BoardReply](t)(a1.RenewAll(ctxT(t), protocol.BoardKindRun))
	if got := keysOf(rep.Tasks); len(got) != 1 || got[0] != "p.r" {
		t.Fatalf("renew-all of run tasks: %v", got)
	}
	e.clk.Advance(20 * time.Second)
	e.waitStatus(t, "p", "q1", protocol.BoardReady)
	e.waitStatus(t, "p", "q2", protocol.BoardReady)
	e.status(t, "p", "r", protocol.BoardClaimed)

	// agent-2 renews nothing of agent-1's.
	claim(t, a2, "p", "other")
	rep = must[*protocol.BoardReply](t)(a2.RenewAll(ctxT(t), ""))
	if got := keysOf(rep.Tasks); len(got) != 1 || got[0] != "p.other" {
		t.Fatalf("agent-2's renew-all: %v", got)
	}
}

// A runtime that starts gives back what its agent held before, each
// attempt counted: ready again, or failed once out of attempts, so a task
// that kills its agent does not run for ever. Another agent's claims stay.
func TestAbandonGivesBackWhatAnAgentHeld(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "crash", Prompt: "x", Attempts: 2}, prompt("other")))
	claim(t, a1, "p", "crash")
	claim(t, a2, "p", "other")

	rep := must[*protocol.BoardReply](t)(a1.Abandon(ctxT(t)))
	if len(rep.Tasks) != 1 || rep.Tasks[0].Status != protocol.BoardReady || rep.Tasks[0].Attempts != 1 {
		t.Fatalf("abandon: %+v", rep.Tasks)
	}
	back := e.status(t, "p", "crash", protocol.BoardReady)
	if back.Reason != "abandoned: agent-1 started again while holding it (attempt 1 of 2)" || back.Holder != "" {
		t.Fatalf("given back: %+v", back)
	}
	e.status(t, "p", "other", protocol.BoardClaimed)

	if got := claim(t, a1, "p", "crash"); got.Attempts != 2 {
		t.Fatalf("second claim: %+v", got)
	}
	must[*protocol.BoardReply](t)(a1.Abandon(ctxT(t)))
	failed := e.status(t, "p", "crash", protocol.BoardFailed)
	if failed.Reason != "abandoned: agent-1 started again while holding it; out of attempts (2 of 2)" {
		t.Fatalf("out of attempts: %+v", failed)
	}
	// Nothing held: an abandon gives back nothing.
	if rep := must[*protocol.BoardReply](t)(a1.Abandon(ctxT(t))); len(rep.Tasks) != 0 {
		t.Fatalf("second abandon: %+v", rep.Tasks)
	}
	e.status(t, "p", "other", protocol.BoardClaimed)
}

// The board's lease is the topology's (flock:board.lease).
func TestTheLeaseIsTheFlocks(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	e.setBoard(t, func(c *protocol.BoardConfig) { c.Lease = protocol.Duration(90 * time.Second) })
	a1 := e.agent(t, "agent-1")
	e.apply(t, plan("p", prompt("a")))
	got := claim(t, a1, "p", "a")
	if !got.LeaseUntil.Equal(e.clk.Now().Add(90 * time.Second)) {
		t.Fatalf("claimed under a lease until %s, want 90 s from %s", got.LeaseUntil, e.clk.Now())
	}
	e.clk.Advance(60 * time.Second)
	time.Sleep(50 * time.Millisecond)
	e.status(t, "p", "a", protocol.BoardClaimed)
	e.clk.Advance(31 * time.Second)
	e.waitStatus(t, "p", "a", protocol.BoardReady)
}
