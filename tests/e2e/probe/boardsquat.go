// The squatting probe: a hostile agent holding a task of a plan takes the
// ID the operator's next version will add, and asks about another agent's
// task (TestHostileBoardSquat in tests/e2e).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// boardSquat is a hostile agent holding task under of plan: it adds a
// subtask under the ID squat (the one the operator's next version of the
// plan will add) and one in victim's namespace, completes under, claims
// what it added, puts a forged artifact under it and completes it with a
// forged result. Then it asks about hidden (a task for victim) with every
// op, and about a task that does not exist, with its own key and raw
// requests, and says for each op whether the two replies are the same but
// the name. It prints a JSON map: each step's outcome ("ok", a board
// code; "added" the ID the board gave), and "oracle <op>": "same" or both
// replies.
func boardSquat(url, seedFile, plan, under, squat, victim, hidden string) {
	self := os.Getenv("AGENT_ID")
	cl, nc := boardConn(url, seedFile, make(chan error, 8))
	defer nc.Close()
	out := map[string]string{}
	ask := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out[name] = boardCode(f(ctx))
	}
	// raw asks op with body as this agent and returns the reply's bytes.
	raw := func(op string, body map[string]any) []byte {
		body["v"] = protocol.Version
		b, _ := json.Marshal(body)
		m, err := nc.Request(protocol.BoardAgentSubject(self, op), b, 10*time.Second)
		if err != nil {
			return []byte("error: " + err.Error())
		}
		return m.Data
	}
	const ghost = "no-such-task"
	oracle := func(name, op string, body func(task string) map[string]any) {
		h := raw(op, body(hidden))
		g := raw(op, body(ghost))
		if bytes.Equal(bytes.ReplaceAll(h, []byte(hidden), []byte(ghost)), g) {
			out["oracle "+name] = "same"
		} else {
			out["oracle "+name] = fmt.Sprintf("%s | missing: %s", h, g)
		}
	}

	ask("claim under", func(ctx context.Context) error { _, err := cl.Claim(ctx, plan, under, ""); return err })
	added := ""
	ask("add squat", func(ctx context.Context) error {
		t, err := cl.Add(ctx, plan, under, protocol.BoardTaskSpec{ID: squat, Prompt: "squatted", Assignee: self})
		if err == nil {
			added = t.ID
		}
		return err
	})
	out["added"] = added
	ask("add in victim's namespace", func(ctx context.Context) error {
		_, err := cl.Add(ctx, plan, under, protocol.BoardTaskSpec{ID: victim + "/" + squat, Prompt: "squatted", Assignee: self})
		return err
	})
	// Holding under, it may add: a subtask needing hidden.
	oracle("add needing", protocol.BoardOpAdd, func(task string) map[string]any {
		return map[string]any{"plan": plan, "task": under, "tasks": []any{map[string]any{"id": "peek", "prompt": "x", "needs": []string{task}}}}
	})
	ask("complete under", func(ctx context.Context) error {
		_, err := cl.Complete(ctx, plan, under, protocol.BoardResult{Summary: "worked"})
		return err
	})
	if added != "" {
		ask("claim squat", func(ctx context.Context) error { _, err := cl.Claim(ctx, plan, added, ""); return err })
		ask("put forged artifact", func(ctx context.Context) error {
			_, err := cl.Put(ctx, plan, added, "release.txt", []byte("forged by "+self))
			return err
		})
		ask("complete squat", func(ctx context.Context) error {
			_, err := cl.Complete(ctx, plan, added, protocol.BoardResult{Summary: "deployed v1.2.3 to prod", Artifacts: []string{"release.txt"}})
			return err
		})
	}
	// Holding nothing now: every other op, about hidden and about a ghost.
	task := func(extra map[string]any) func(string) map[string]any {
		return func(t string) map[string]any {
			m := map[string]any{"plan": plan, "task": t}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
	}
	oracle("show", protocol.BoardOpShow, task(nil))
	oracle("claim", protocol.BoardOpClaim, task(nil))
	oracle("claim a run", protocol.BoardOpClaim, task(map[string]any{"kind": "run"}))
	oracle("renew", protocol.BoardOpRenew, task(nil))
	oracle("complete", protocol.BoardOpComplete, task(map[string]any{"result": map[string]any{"summary": "forged"}}))
	oracle("fail", protocol.BoardOpFail, task(map[string]any{"reason": "forged"}))
	oracle("release", protocol.BoardOpRelease, task(nil))
	oracle("add under", protocol.BoardOpAdd, task(map[string]any{"tasks": []any{map[string]any{"id": "sneak", "prompt": "x"}}}))
	oracle("put", protocol.BoardOpPut, task(map[string]any{"name": "evil.txt", "data": []byte("forged")}))
	oracle("get", protocol.BoardOpGet, task(map[string]any{"name": "release.txt"}))
	json.NewEncoder(os.Stdout).Encode(out)
}

// boardPut puts text as artifact name of plan/task, which this agent holds:
// the victim's side of TestHostileBoard.
func boardPut(url, seedFile, plan, task, name, text string) {
	cl, nc := boardConn(url, seedFile, make(chan error, 8))
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := cl.Put(ctx, plan, task, name, []byte(text))
	if err != nil {
		fail(err)
	}
	b, _ := json.Marshal(a)
	fmt.Println(string(b))
}
