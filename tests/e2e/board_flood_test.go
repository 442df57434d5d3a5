package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A hostile agent tries to take the board down for everyone: from its
// container, with its own key, agent-1 holds a task of a plan of 40 tasks
// with prompts at their largest (a whole list of them about 650 KiB), adds
// what subtasks its quota allows, then sends list requests as fast as the
// bus reads them from it for 40 s, with a reply subject nobody listens on.
// Meanwhile agent-2's runtime claims and completes a run task the operator
// applies, within a few seconds, and the operator's apply passes; the
// services are neither restarted nor killed for memory, and the board
// answers at once afterwards. Before the board's lanes and pages, and with
// the services' link read at an agent's rate, the services were OOM-killed
// and the board stayed down.
func TestHostileBoardFlood(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f, a1, a2 := needTwo(t)
	cl := boardOperator(t)
	services := f.name + "-services"
	state := func() (restarts float64, oom bool, health string) {
		doc := inspect(t, services)
		restarts, _ = doc["RestartCount"].(float64)
		st := doc["State"].(map[string]any)
		if h, ok := st["Health"].(map[string]any); ok {
			health, _ = h["Status"].(string)
		}
		return restarts, st["OOMKilled"] == true, health
	}
	restartsBefore, _, _ := state()

	flood := boardPlanID("flood")
	big := strings.Repeat("y", protocol.MaxBoardPrompt-64)
	tasks := []protocol.BoardTaskSpec{{ID: "anchor", Prompt: "agent-1's", Assignee: a1}}
	for i := range 40 {
		tasks = append(tasks, protocol.BoardTaskSpec{ID: fmt.Sprintf("big-%d", i), Prompt: big, Assignee: a1})
	}
	applyBoard(t, cl, protocol.BoardPlan{Plan: flood, Tasks: tasks})

	const floodFor = 40 * time.Second
	r := probeAsync(a1, 3*time.Minute, "board-flood", "nats://bus:4222", protocol.ContainerCredsFile, flood, "anchor", floodFor.String())
	time.Sleep(10 * time.Second) // the flood under way (its adds take a few seconds at the agent's rate)

	victim := boardPlanID("victim")
	start := time.Now()
	applyBoard(t, cl, protocol.BoardPlan{Plan: victim, Tasks: []protocol.BoardTaskSpec{
		{ID: "work", Run: []string{"/flock-agent", "tool", "echo", "served"}, Assignee: a2},
	}})
	applied := time.Since(start)
	var done protocol.BoardTask
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		task, err := cl.Show(boardCtx(t), victim, "work")
		if err == nil && task.Status == protocol.BoardDone {
			done = *task
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent-2's task not done 30 s into agent-1's flood: %+v %v", task, err)
		}
	}
	took := time.Since(start)
	second := boardPlanID("during")
	applyBoard(t, cl, protocol.BoardPlan{Plan: second, Tasks: []protocol.BoardTaskSpec{{ID: "x", Prompt: "applied during the flood", Assignee: a2}}})

	res := <-r
	if err := res.ended(); err != nil {
		t.Fatalf("the flood probe: %v: %s", err, res.all())
	}
	var outcome struct {
		Added int `json:"added"`
		Sent  int `json:"sent"`
	}
	if err := json.Unmarshal([]byte(lastLine(res.out)), &outcome); err != nil {
		t.Fatalf("%q: %v", res.out, err)
	}
	t.Logf("agent-1 sent %d list requests in %s (and added %d subtasks); meanwhile the operator's apply took %s and agent-2's task was done %s after it (summary %q)",
		outcome.Sent, floodFor, outcome.Added, applied.Round(time.Millisecond), took.Round(time.Millisecond), done.Result.Summary)
	if outcome.Sent < 50000 {
		t.Fatalf("agent-1 sent only %d requests in %s: no flood to speak of", outcome.Sent, floodFor)
	}
	if took > 10*time.Second {
		t.Errorf("agent-2's task took %s from the apply to done during the flood, want a few seconds", took)
	}
	// Afterwards: the same services, answering at once.
	ctx := testContext(t, 5*time.Second)
	if _, err := cl.List(ctx, victim); err != nil {
		t.Fatalf("the board after the flood: %v", err)
	}
	if restarts, oom, health := state(); restarts != restartsBefore || oom || health != "healthy" {
		t.Fatalf("the services after the flood: restarted %v times (before %v), OOM-killed %v, health %q", restarts, restartsBefore, oom, health)
	}
}
