package board_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The board knows an agent by its ID only: an agent removed from the
// topology and listed again is the same agent to it. Its claims are given
// back when the new one's runtime starts (abandon), each attempt counted;
// the tasks assigned to its ID and the subtasks in its namespace stay its.
func TestAReusedIDIsTheSameAgentToTheBoard(t *testing.T) {
	t.Parallel()
	e := start(t, 3)
	old := e.agent(t, "agent-3")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "mine", Prompt: "x", Assignee: "agent-3", Attempts: 3}))
	claim(t, old, "p", "mine")
	if _, err := old.Add(ctxT(t), "p", "mine", protocol.BoardTaskSpec{ID: "sub", Prompt: "y"}); err != nil {
		t.Fatal(err)
	}

	e.f.Rerender(t, flock.Config{Target: "docker", Agents: []flock.AgentConfig{{ID: "agent-1"}, {ID: "agent-2"}}})
	e.f.Rerender(t, bustest.Agents(3))
	reborn := e.agent(t, "agent-3")
	rep := must[*protocol.BoardReply](t)(reborn.Abandon(ctxT(t)))
	if got := keysOf(rep.Tasks); len(got) != 1 || got[0] != "p.mine" || rep.Tasks[0].Status != protocol.BoardReady || rep.Tasks[0].Attempts != 1 {
		t.Fatalf("the new agent-3's abandon gave back %+v, want p.mine ready after 1 attempt", rep.Tasks)
	}
	if got := claim(t, reborn, "p", "mine"); got.Holder != "agent-3" || got.Attempts != 2 {
		t.Fatalf("the new agent-3 claims the task assigned to its ID: %+v", got)
	}
	if sub, err := reborn.Show(ctxT(t), "p", "agent-3/sub"); err != nil || sub.CreatedBy != "agent-3" {
		t.Fatalf("the earlier agent-3's subtask, to the new one: %+v %v", sub, err)
	}
}
