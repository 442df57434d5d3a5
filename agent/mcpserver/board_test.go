package mcpserver_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/boardtest"
)

// The board's tools against a fake board service: what each tool sends,
// on whose subject, and how it shows the answer or the refusal.

func boardTask(plan, id, status string) protocol.BoardTask {
	return protocol.BoardTask{V: 1, Plan: plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: id, Prompt: "p"}, Status: status, CreatedBy: "operator", Updated: time.Now()}
}

// only returns the only request the fake received, checking its subject.
func only(t *testing.T, f *boardtest.Fake, subject string) protocol.BoardRequest {
	t.Helper()
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Subject != subject {
		t.Fatalf("requests %+v, want one on %s", reqs, subject)
	}
	return reqs[0].Body
}

func TestAgentBoardTools(t *testing.T) {
	t.Parallel()
	f := boardtest.Start(t)
	a := client(t, mcpserver.NewAgent(f.Connect(t, boardtest.Agent), mcpserver.AgentConfig{ID: boardtest.Agent, AgentDir: t.TempDir()}))
	held := boardTask("p", "build", protocol.BoardClaimed)
	held.Holder, held.LeaseUntil, held.Attempts = boardtest.Agent, time.Now().Add(10*time.Minute), 1
	f.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Op {
		case protocol.BoardOpClaim:
			if r.Body.Plan == "empty" {
				return boardtest.Refuse(protocol.BoardErrNothing, "nothing ready for agent-1")
			}
			dep := boardTask("p", "spec", protocol.BoardDone)
			dep.Result = &protocol.BoardResult{Summary: "the spec"}
			return protocol.BoardReply{Task: &held, Context: []protocol.BoardTask{dep}}
		case protocol.BoardOpList:
			return protocol.BoardReply{Tasks: []protocol.BoardTask{held}}
		case protocol.BoardOpAdd:
			t := boardTask(r.Body.Plan, r.Body.Tasks[0].ID, protocol.BoardReady)
			t.Run, t.Prompt, t.Parent = r.Body.Tasks[0].Run, "", r.Body.Task
			return protocol.BoardReply{Task: &t}
		case protocol.BoardOpRenew:
			return boardtest.Refuse(protocol.BoardErrNotHolder, "agent-1 does not hold p.build")
		}
		t := held
		return protocol.BoardReply{Task: &t}
	})
	subject := func(op string) string { return protocol.BoardAgentSubject(boardtest.Agent, op) }

	c := call[mcpserver.BoardClaimOut](t, a, "board_claim", map[string]any{"plan": "p", "kind": "prompt"})
	req := only(t, f, subject(protocol.BoardOpClaim))
	if req.Plan != "p" || req.Kind != "prompt" || !c.Claimed || c.Task.ID != "build" || c.Task.Holder != boardtest.Agent || c.Task.LeaseUntil == nil ||
		c.Task.Attempts != protocol.DefaultBoardAttempts || c.Task.AttemptsUsed != 1 || c.Task.Kind != "prompt" ||
		len(c.Context) != 1 || c.Context[0].Result.Summary != "the spec" {
		t.Fatalf("request %+v, claim %+v", req, c)
	}
	if c := call[mcpserver.BoardClaimOut](t, a, "board_claim", map[string]any{"plan": "empty"}); c.Claimed || c.Note != "nothing ready for agent-1" || c.Task != nil {
		t.Fatalf("nothing to claim: %+v", c)
	}
	f.Requests()

	call[mcpserver.BoardTaskOut](t, a, "board_complete", map[string]any{"plan": "p", "task": "build", "summary": "built", "artifacts": []string{"a.txt"}})
	if req := only(t, f, subject(protocol.BoardOpComplete)); !reflect.DeepEqual(req.Result, &protocol.BoardResult{Summary: "built", Artifacts: []string{"a.txt"}}) || req.Task != "build" {
		t.Fatalf("complete %+v", req)
	}
	call[mcpserver.BoardTaskOut](t, a, "board_fail", map[string]any{"plan": "p", "task": "build", "reason": "broken"})
	if req := only(t, f, subject(protocol.BoardOpFail)); req.Reason != "broken" {
		t.Fatalf("fail %+v", req)
	}
	call[mcpserver.BoardTaskOut](t, a, "board_release", map[string]any{"plan": "p", "task": "build"})
	only(t, f, subject(protocol.BoardOpRelease))
	callFails(t, a, "board_renew", map[string]any{"plan": "p", "task": "build"}, "agent-1 does not hold p.build", "(not-holder)")
	only(t, f, subject(protocol.BoardOpRenew))

	out := call[mcpserver.BoardTaskOut](t, a, "board_add", map[string]any{"plan": "p", "under": "build", "id": "lint", "run": []string{"make", "lint"}, "needs": []string{"a"}, "timeout_seconds": 90})
	req = only(t, f, subject(protocol.BoardOpAdd))
	want := []protocol.BoardTaskSpec{{ID: "lint", Run: []string{"make", "lint"}, Needs: []string{"a"}, Timeout: protocol.Duration(90 * time.Second)}}
	if req.Plan != "p" || req.Task != "build" || !reflect.DeepEqual(req.Tasks, want) || out.ID != "lint" || out.Kind != "run" || out.Parent != "build" {
		t.Fatalf("add: request %+v, out %+v", req, out)
	}
	if l := call[mcpserver.BoardListOut](t, a, "board_list", map[string]any{"status": []string{"claimed"}}); len(l.Tasks) != 1 || l.Tasks[0].ID != "build" {
		t.Fatalf("list %+v", l)
	}
	if req := only(t, f, subject(protocol.BoardOpList)); !reflect.DeepEqual(req.Status, []string{"claimed"}) {
		t.Fatalf("list %+v", req)
	}

	callFails(t, a, "board_claim", map[string]any{"kind": "shell"}, "kind:")
	callFails(t, a, "board_list", map[string]any{"status": []string{"finished"}}, "status:", "finished")
	callFails(t, a, "board_complete", map[string]any{"plan": "p"}, "missing properties")
	if reqs := f.Requests(); len(reqs) != 0 {
		t.Fatalf("bad input reached the board: %+v", reqs)
	}
	f.Stop()
	callFails(t, a, "board_list", nil, "no board service")
}

func TestOperatorBoardTools(t *testing.T) {
	t.Parallel()
	f := boardtest.Start(t)
	op := operatorClient(t, f.Connect(t, protocol.OperatorUser))
	done := boardTask("p", "build", protocol.BoardDone)
	done.Result = &protocol.BoardResult{Summary: "built"}
	f.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Op {
		case protocol.BoardOpApply:
			if len(r.Body.Tasks) == 1 {
				return boardtest.Refuse(protocol.BoardErrInvalid, "tasks[0].needs: ghost is not a task of plan p")
			}
			return protocol.BoardReply{Changes: []protocol.BoardChange{
				{Task: "build", Change: protocol.BoardCreated, Status: protocol.BoardReady},
				{Task: "review", Change: protocol.BoardCreated, Status: protocol.BoardBlocked},
			}}
		case protocol.BoardOpList:
			return protocol.BoardReply{Tasks: []protocol.BoardTask{done}}
		case protocol.BoardOpRetry:
			return boardtest.Refuse(protocol.BoardErrNotReady, "p.build is done")
		}
		t := done
		t.Status, t.Reason = protocol.BoardCancelled, r.Body.Reason
		return protocol.BoardReply{Task: &t}
	})
	subject := protocol.BoardOperatorSubject

	ap := call[mcpserver.BoardApplyOut](t, op, "board_apply", map[string]any{"plan": "p", "tasks": []map[string]any{
		{"id": "build", "run": []string{"make"}, "timeout_seconds": 300, "labels": []string{"builder"}},
		{"id": "review", "prompt": "Review.", "needs": []string{"build"}, "attempts": 2, "assignee": "agent-2", "title": "Review"},
	}})
	req := only(t, f, subject(protocol.BoardOpApply))
	want := []protocol.BoardTaskSpec{
		{ID: "build", Run: []string{"make"}, Timeout: protocol.Duration(5 * time.Minute), Labels: []string{"builder"}},
		{ID: "review", Title: "Review", Prompt: "Review.", Needs: []string{"build"}, Attempts: 2, Assignee: "agent-2"},
	}
	if req.Plan != "p" || !reflect.DeepEqual(req.Tasks, want) || ap.Plan != "p" || len(ap.Changes) != 2 || ap.Counts["created"] != 2 {
		t.Fatalf("apply: request %+v, out %+v", req, ap)
	}
	callFails(t, op, "board_apply", map[string]any{"plan": "p", "tasks": []map[string]any{{"id": "a", "prompt": "x", "needs": []string{"ghost"}}}},
		"ghost is not a task of plan p", "(invalid)")
	callFails(t, op, "board_apply", map[string]any{"tasks": []map[string]any{}}, "missing properties")
	f.Requests()

	if l := call[mcpserver.BoardListOut](t, op, "board_list", map[string]any{"plan": "p"}); len(l.Tasks) != 1 || l.Tasks[0].Result.Summary != "built" {
		t.Fatalf("list %+v", l)
	}
	if req := only(t, f, subject(protocol.BoardOpList)); req.Plan != "p" {
		t.Fatalf("list %+v", req)
	}
	if s := call[mcpserver.BoardTaskOut](t, op, "board_show", map[string]any{"plan": "p", "task": "build"}); s.Status != protocol.BoardCancelled {
		t.Fatalf("show %+v", s)
	}
	only(t, f, subject(protocol.BoardOpShow))
	if c := call[mcpserver.BoardTaskOut](t, op, "board_cancel", map[string]any{"plan": "p", "task": "build", "reason": "obsolete"}); c.Reason != "obsolete" {
		t.Fatalf("cancel %+v", c)
	}
	if req := only(t, f, subject(protocol.BoardOpCancel)); req.Reason != "obsolete" || req.Task != "build" {
		t.Fatalf("cancel %+v", req)
	}
	callFails(t, op, "board_retry", map[string]any{"plan": "p", "task": "build"}, "p.build is done (not-ready)")
	only(t, f, subject(protocol.BoardOpRetry))
	call[mcpserver.BoardRemoveOut](t, op, "board_remove_plan", map[string]any{"plan": "p"})
	if req := only(t, f, subject(protocol.BoardOpRemove)); req.Plan != "p" {
		t.Fatalf("remove %+v", req)
	}
}

// board_apply with dry_run asks the board's dry run: the changes it would
// make; one it would refuse comes as its changes and the refusal, not a tool
// error; a bad plan's refusal is a tool error, as for an apply.
func TestOperatorBoardApplyDryRun(t *testing.T) {
	t.Parallel()
	f := boardtest.Start(t)
	op := operatorClient(t, f.Connect(t, protocol.OperatorUser))
	refused := []protocol.BoardChange{{Task: "deploy", Change: protocol.BoardRefused, Status: protocol.BoardDone, Why: "was created by agent-1, not the operator: apply does not adopt it"}}
	f.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Body.Tasks[0].ID {
		case "deploy":
			return protocol.BoardReply{Changes: refused, Code: protocol.BoardErrForbidden, Error: "the plan is not applied: 1 of its tasks"}
		case "bad":
			return boardtest.Refuse(protocol.BoardErrInvalid, "a cycle")
		}
		return protocol.BoardReply{Changes: []protocol.BoardChange{{Task: r.Body.Tasks[0].ID, Change: protocol.BoardCreated, Status: protocol.BoardReady}}}
	})
	task := func(id string) []map[string]any { return []map[string]any{{"id": id, "prompt": "x"}} }
	out := call[mcpserver.BoardApplyOut](t, op, "board_apply", map[string]any{"plan": "p", "tasks": task("build"), "dry_run": true})
	only(t, f, protocol.BoardOperatorSubject(protocol.BoardOpDryRun))
	if !out.DryRun || out.Counts["created"] != 1 || out.Refused != "" {
		t.Fatalf("dry run %+v", out)
	}
	out = call[mcpserver.BoardApplyOut](t, op, "board_apply", map[string]any{"plan": "p", "tasks": task("deploy"), "dry_run": true})
	if !out.DryRun || !reflect.DeepEqual(out.Changes, refused) || out.Counts["refused"] != 1 || !strings.Contains(out.Refused, "not applied") || !strings.Contains(out.Refused, "(forbidden)") {
		t.Fatalf("a refused dry run %+v", out)
	}
	f.Requests()
	callFails(t, op, "board_apply", map[string]any{"plan": "p", "tasks": task("bad"), "dry_run": true}, "a cycle (invalid)")
	out = call[mcpserver.BoardApplyOut](t, op, "board_apply", map[string]any{"plan": "p", "tasks": task("build")})
	if reqs := f.Requests(); out.DryRun || len(reqs) != 2 || reqs[0].Subject != protocol.BoardOperatorSubject(protocol.BoardOpDryRun) || reqs[1].Subject != protocol.BoardOperatorSubject(protocol.BoardOpApply) {
		t.Fatalf("an apply %+v, requests %+v", out, reqs)
	}
}

// An agent's artifact tools: put sends the text as the artifact's bytes
// under the held task; get gives text back as text and other bytes as
// base64.
func TestAgentArtifactTools(t *testing.T) {
	t.Parallel()
	f := boardtest.Start(t)
	a := client(t, mcpserver.NewAgent(f.Connect(t, boardtest.Agent), mcpserver.AgentConfig{ID: boardtest.Agent, AgentDir: t.TempDir()}))
	f.Handle(func(r boardtest.Request) protocol.BoardReply {
		art := &protocol.BoardArtifact{Plan: r.Body.Plan, Task: r.Body.Task, Name: r.Body.Name, Size: len(r.Body.Data), By: boardtest.Agent}
		if r.Op == protocol.BoardOpGet && r.Body.Name == "bin" {
			return protocol.BoardReply{Artifact: art, Data: []byte{0xff, 0x00}}
		}
		if r.Op == protocol.BoardOpGet {
			return protocol.BoardReply{Artifact: art, Data: []byte("the notes")}
		}
		return protocol.BoardReply{Artifact: art}
	})
	subject := func(op string) string { return protocol.BoardAgentSubject(boardtest.Agent, op) }
	put := call[mcpserver.BoardArtifactOut](t, a, "board_put_artifact", map[string]any{"plan": "p", "task": "build", "name": "notes.md", "text": "the notes"})
	if req := only(t, f, subject(protocol.BoardOpPut)); req.Name != "notes.md" || string(req.Data) != "the notes" || put.Artifact.Size != 9 {
		t.Fatalf("put: %+v, request %+v", put, req)
	}
	if got := call[mcpserver.BoardArtifactOut](t, a, "board_get_artifact", map[string]any{"plan": "p", "task": "spec", "name": "notes.md"}); got.Text != "the notes" || got.Base64 != "" {
		t.Fatalf("get text: %+v", got)
	}
	if got := call[mcpserver.BoardArtifactOut](t, a, "board_get_artifact", map[string]any{"plan": "p", "task": "spec", "name": "bin"}); got.Text != "" || got.Base64 != "/wA=" {
		t.Fatalf("get binary: %+v", got)
	}
}
