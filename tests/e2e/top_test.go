package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/top"
)

// What `flock-agent top` reads, from the agents in their containers: an
// agent's own recent log lines, asked over the bus, and a running task in
// its heartbeat, as the dashboard shows it.
func TestTopReadsTheAgentsInTheirContainers(t *testing.T) {
	cl := operatorClient(t)
	ctx := testContext(t, 60*time.Second)

	rep, err := cl.Logs(ctx, "agent-1", 20)
	if err != nil {
		t.Fatalf("agent-1's log lines: %v", err)
	}
	if rep.Agent != "agent-1" || len(rep.Lines) == 0 {
		t.Fatalf("agent-1 answered %+v", rep)
	}
	for _, l := range rep.Lines {
		if !strings.Contains(l, `"agent":"agent-1"`) {
			t.Fatalf("a line of agent-1's answer is not agent-1's: %s", l)
		}
	}

	// A task that runs a while: the dashboard lists it under agent-2 (its
	// heartbeats come every interval), then sees it end from its result.
	id := taskID(t, "top")
	go func() { _, _ = cl.Run(ctx, operator.Target{Agent: "agent-2"}, taskExec(id, "sleep", "20s"), nil) }()
	var frame string
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		var out strings.Builder
		if err := top.Run(ctx, &top.BusSource{Op: cl}, top.Options{Once: true, Every: 2 * time.Second, Out: &out}); err != nil {
			t.Fatalf("top --once: %v", err)
		}
		frame = out.String()
		for _, l := range strings.Split(frame, "\n") {
			// The TASK column is 28 wide: a longer ID is cut with "…".
			if strings.Contains(l, " agent-2 ") && strings.Contains(l, id[:20]) {
				return
			}
		}
	}
	t.Fatalf("the dashboard never showed agent-2 running %s:\n%s", id, frame)
}
