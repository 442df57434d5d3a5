package board_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// For a task an agent may not see, every op answers as for one that does
// not exist: the reply is the same, byte for byte, but the name. Nothing
// tells the agent the task's status, that it is someone else's, or that it
// exists. Tasks it may see keep their useful refusals.
func TestInvisibleTasksAnswerAsMissingOnes(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	e.setBoard(t, func(c *protocol.BoardConfig) {
		setAgent(c, protocol.BoardAgent{ID: "agent-1", ClaimLimit: 2})
		setAgent(c, protocol.BoardAgent{ID: "agent-2", Labels: []string{"secret"}, ClaimLimit: 10})
	})
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	for2 := func(id string, needs ...string) protocol.BoardTaskSpec {
		return protocol.BoardTaskSpec{ID: id, Prompt: "agent-2's " + id, Assignee: "agent-2", Needs: needs}
	}
	e.apply(t, plan("p",
		for2("h-ready"), for2("h-claimed"), for2("h-done"), for2("h-failed"), for2("h-cancelled"), for2("h-blocked", "h-claimed"),
		protocol.BoardTaskSpec{ID: "h-label", Prompt: "x", Labels: []string{"secret"}},
		protocol.BoardTaskSpec{ID: "h-run", Run: []string{"true"}, Assignee: "agent-2"},
		protocol.BoardTaskSpec{ID: "mine", Prompt: "agent-1's", Assignee: "agent-1"},
		prompt("open"),
	))
	e.apply(t, plan("q", for2("only")))
	for _, id := range []string{"h-claimed", "h-done", "h-failed", "open"} {
		claim(t, a2, "p", id)
	}
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "h-done", "out.txt", []byte("agent-2's")))
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "h-done", protocol.BoardResult{Summary: "done", Artifacts: []string{"out.txt"}}))
	must[*protocol.BoardTask](t)(a2.Fail(ctxT(t), "p", "h-failed", "broken", nil))
	must[*protocol.BoardTask](t)(e.op.Cancel(ctxT(t), "p", "h-cancelled", ""))
	sub := must[*protocol.BoardTask](t)(a2.Add(ctxT(t), "p", "h-claimed", for2("sub")))
	claim(t, a1, "p", "mine")

	nc := e.f.Connect(t, "agent-1")
	ask := func(op string, req map[string]any) []byte {
		t.Helper()
		req["v"] = protocol.Version
		body, _ := json.Marshal(req)
		m, err := nc.Request(protocol.BoardAgentSubject("agent-1", op), body, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		return m.Data
	}
	// Each op, for task id.
	ops := []struct {
		name, op string
		req      func(id string) map[string]any
	}{
		{"show", protocol.BoardOpShow, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id} }},
		{"claim by name", protocol.BoardOpClaim, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id} }},
		{"claim a prompt", protocol.BoardOpClaim, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id, "kind": "prompt"} }},
		{"claim a run", protocol.BoardOpClaim, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id, "kind": "run"} }},
		{"renew", protocol.BoardOpRenew, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id} }},
		{"complete", protocol.BoardOpComplete, func(id string) map[string]any {
			return map[string]any{"plan": "p", "task": id, "result": map[string]any{"summary": "forged"}}
		}},
		{"fail", protocol.BoardOpFail, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id, "reason": "forged"} }},
		{"release", protocol.BoardOpRelease, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id} }},
		{"add under it", protocol.BoardOpAdd, func(id string) map[string]any {
			return map[string]any{"plan": "p", "task": id, "tasks": []any{map[string]any{"id": "sneak", "prompt": "x"}}}
		}},
		{"add needing it", protocol.BoardOpAdd, func(id string) map[string]any {
			return map[string]any{"plan": "p", "task": "mine", "tasks": []any{map[string]any{"id": "peek", "prompt": "x", "needs": []string{id}}}}
		}},
		{"put under it", protocol.BoardOpPut, func(id string) map[string]any {
			return map[string]any{"plan": "p", "task": id, "name": "evil.txt", "data": []byte("forged")}
		}},
		{"get its artifact", protocol.BoardOpGet, func(id string) map[string]any { return map[string]any{"plan": "p", "task": id, "name": "out.txt"} }},
	}
	hidden := []string{"h-ready", "h-claimed", "h-done", "h-failed", "h-cancelled", "h-blocked", "h-label", "h-run", sub.ID}
	const ghost = "ghost"
	for _, o := range ops {
		missing := ask(o.op, o.req(ghost))
		var rep protocol.BoardReply
		if json.Unmarshal(missing, &rep) != nil || rep.Error == "" {
			t.Fatalf("%s of a missing task: %s", o.name, missing)
		}
		for _, id := range hidden {
			got := bytes.ReplaceAll(ask(o.op, o.req(id)), []byte(id), []byte(ghost))
			if !bytes.Equal(got, missing) {
				t.Errorf("%s of %s (which agent-1 may not see): %s\nof a missing task: %s", o.name, id, got, missing)
			}
		}
	}
	// A plan of tasks it may not see lists as a plan there is not.
	if q, none := ask(protocol.BoardOpList, map[string]any{"plan": "q"}), ask(protocol.BoardOpList, map[string]any{"plan": "none"}); !bytes.Equal(q, none) {
		t.Errorf("list of a hidden plan %s, of none %s", q, none)
	}
	// Nothing of it changed a hidden task.
	for id, want := range map[string]string{"h-ready": protocol.BoardReady, "h-claimed": protocol.BoardClaimed, "h-done": protocol.BoardDone, sub.ID: protocol.BoardReady} {
		if got := e.status(t, "p", id, want); got.Holder != "" && got.Holder != "agent-2" || got.Result != nil && got.Result.Summary == "forged" {
			t.Errorf("%s after agent-1's attempts: %+v", id, got)
		}
	}

	// A task it may see keeps the refusal that helps: open, claimed by
	// agent-2, is not ready for agent-1's claim, nor its to complete.
	_, err := a1.Claim(ctxT(t), "p", "open", "")
	if be := refused(t, err, protocol.BoardErrNotReady); !strings.Contains(be.Msg, "claimed") {
		t.Errorf("claim of a visible claimed task: %s", be.Msg)
	}
	_, err = a1.Complete(ctxT(t), "p", "open", protocol.BoardResult{})
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a1.Add(ctxT(t), "p", "open", prompt("x"))
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a1.Claim(ctxT(t), "p", "mine", "run")
	refused(t, err, protocol.BoardErrNotReady) // it holds mine
}
