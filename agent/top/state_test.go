package top_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/top"
	"github.com/ai-flock/ai-flock/protocol"
)

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func item(kind, agent string, body any) operator.Item {
	b, _ := json.Marshal(body)
	return operator.Item{Kind: kind, Agent: agent, Data: b}
}

func TestTheStateFollowsWhatCrossesTheBus(t *testing.T) {
	s := top.NewState()
	s.Apply(top.Look{Queues: map[string]uint64{"agent-1": 2, "agent-2": 0, "agent-3": 0}, Bus: top.Bus{Connected: true, Dead: 1}}, t0)
	s.Take(item("heartbeat", "agent-1", protocol.Heartbeat{Agent: "agent-1", State: "ready", IntervalMS: 1000, Completed: 4,
		Tasks: []protocol.RunningTask{{ID: "build", Kind: "exec", Since: t0.Add(-90 * time.Second)}}}), t0)
	// A heartbeat whose body names another agent counts for the subject's.
	s.Take(item("heartbeat", "agent-2", protocol.Heartbeat{Agent: "agent-1", State: "draining", IntervalMS: 1000}), t0)
	s.Take(item("result", "agent-3", protocol.Result{TaskID: "t9", Status: protocol.StatusFailed, ExitCode: new(3)}), t0)
	s.TakeBudget(protocol.LedgerEntry{Agent: "agent-2", Spent: 600, Budget: 1000, Updated: t0}, t0)

	a1, a2, a3 := s.Agents["agent-1"], s.Agents["agent-2"], s.Agents["agent-3"]
	if a1.State != "ready" || a1.Queue != 2 || a1.TaskAge(t0) != 90*time.Second || a1.Completed != 4 {
		t.Fatalf("agent-1: %+v", a1)
	}
	if a2.State != "draining" || s.Agents["agent-1"].State != "ready" {
		t.Fatalf("agent-2's heartbeat went to the body's agent: %+v", a2)
	}
	if a3.Failed != 1 || len(s.Failures) != 1 || s.Failures[0].Why != "exit 3" {
		t.Fatalf("agent-3's failure: %+v %+v", a3, s.Failures)
	}
	if a2.Spent != 600 || a2.Limit != 1000 || !a2.Budgeted {
		t.Fatalf("agent-2's budget: %+v", a2)
	}
	// The result of agent-1's running task ends it at once.
	s.Take(item("result", "agent-1", protocol.Result{TaskID: "build", Status: protocol.StatusOK}), t0.Add(time.Second))
	if len(a1.Tasks) != 0 {
		t.Fatalf("agent-1 still runs %+v", a1.Tasks)
	}
	// Silent for three intervals: stale.
	if !a1.Stale(t0.Add(3500*time.Millisecond)) || a1.Stale(t0.Add(2*time.Second)) {
		t.Fatal("staleness is three heartbeat intervals")
	}

	ids := func(rows []*top.Agent) string {
		var out []string
		for _, a := range rows {
			out = append(out, a.ID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(s.Rows("tokens", "", t0)); got != "agent-2,agent-1,agent-3" {
		t.Fatalf("by tokens: %s", got)
	}
	if got := ids(s.Rows("failed", "", t0)); got != "agent-3,agent-1,agent-2" {
		t.Fatalf("by failures: %s", got)
	}
	s.Take(item("heartbeat", "agent-10", protocol.Heartbeat{State: "ready"}), t0)
	if got := ids(s.Rows("agent", "", t0)); got != "agent-1,agent-2,agent-3,agent-10" {
		t.Fatalf("by agent, as a person counts: %s", got)
	}
	if got := ids(s.Rows("agent", "drain", t0)); got != "agent-2" {
		t.Fatalf("filtered by state: %s", got)
	}
}

func TestTheScreenShowsEveryFigure(t *testing.T) {
	s := top.NewState()
	s.Apply(top.Look{Queues: map[string]uint64{"agent-1": 0, "agent-2": 5}, Bus: top.Bus{Connected: true, URL: "nats://bus:4222", Pool: 3, Dead: 2, Replicas: 3, Current: 2, Leader: "flock-bus-2"},
		Board: &top.Board{Plans: 1, ByStatus: map[string]int{"done": 3, "claimed": 1, "ready": 4}}}, t0)
	s.Take(item("heartbeat", "agent-1", protocol.Heartbeat{State: "ready", IntervalMS: 1000,
		Tasks: []protocol.RunningTask{{ID: "compile", Since: t0.Add(-5 * time.Second)}}}), t0)
	s.TakeBudget(protocol.LedgerEntry{Agent: "agent-1", Spent: 250, Budget: 1000, Updated: t0}, t0)
	out := top.Render(s, top.Screen{Sort: "agent", Selected: "agent-1", Width: 160, Height: 30}, t0.Add(time.Second))
	for _, want := range []string{
		"2 agents", "bus: ok nats://bus:4222", "nodes 2/3 current, leader flock-bus-2", "pool 3", "dead letters 2",
		"board: 3/8 done", "claimed 1", "ready 4",
		"> agent-1", "compile", "6.0s", "1.0s", "250/1000 [██········]",
		"  agent-2", "never", "recent failures",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("screen lacks %q:\n%s", want, out)
		}
	}
	logs := top.Render(s, top.Screen{Logs: &top.Logs{Agent: "agent-1", Lines: []string{`{"msg":"agent ready"}`}, At: t0}}, t0)
	if !strings.Contains(logs, "logs of agent-1") || !strings.Contains(logs, `{"msg":"agent ready"}`) {
		t.Fatalf("logs screen:\n%s", logs)
	}
}

// What an agent puts in its heartbeat, results or logs reaches the terminal
// as text: a hostile agent cannot move the cursor, clear the screen or
// retitle the terminal with an escape sequence of its own.
func TestAnAgentsTextCannotDriveTheTerminal(t *testing.T) {
	s := top.NewState()
	evil := "x\x1b[2J\x1b]0;pwned\x07\u009b31m\r\nrow"
	s.Take(item("heartbeat", "agent-1", protocol.Heartbeat{State: evil, IntervalMS: 1000, Tasks: []protocol.RunningTask{{ID: evil, Since: t0}}}), t0)
	s.Take(item("result", "agent-1", protocol.Result{TaskID: evil, Status: protocol.StatusError, Error: evil}), t0)
	// And a heartbeat on a subject that is no agent's is dropped.
	s.Take(item("heartbeat", "../x", protocol.Heartbeat{State: "ready"}), t0)
	screens := []string{
		top.Render(s, top.Screen{Sort: "agent", Width: 400, Height: 40}, t0),
		top.Render(s, top.Screen{Logs: &top.Logs{Agent: "agent-1", Lines: []string{evil}, At: t0}, Width: 400, Height: 40}, t0),
	}
	for _, out := range screens {
		for _, r := range out {
			if r != '\n' && (r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
				t.Fatalf("a control character %U reached the screen:\n%q", r, out)
			}
		}
	}
	if len(s.Agents) != 1 {
		t.Fatalf("agents: %v", s.Agents)
	}
}
