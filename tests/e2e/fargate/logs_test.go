package fargate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/logbound"
	"github.com/ai-flock/ai-flock/infra/awsflock"
)

// A hostile agent floods its task's log (what CloudWatch Logs would
// ingest and bill) as fast as it can for 10 s, through every way it finds:
// other processes' stdout and stderr reopened through /proc/<pid>/fd and
// taken with pidfd_getfd. PID 1 (the agent's own init) gives it nothing;
// what it reaches (the runtime's output) is held to the bound, and a note
// in the log counts what was held back.
func TestFargateAgentLogFloodIsBounded(t *testing.T) {
	need(t)
	ctx := context.Background()
	_, c := agentTask(t, "agent-1")
	before, err := engine.Logs(ctx, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	const flood = 10 * time.Second
	start := time.Now()
	out, _ := inAgent(t, "agent-1", "log-flood", flood.String())
	var rep struct {
		Written map[string]int64  `json:"written"`
		Refused map[string]string `json:"refused"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	var total int64
	for how, n := range rep.Written {
		if strings.HasPrefix(strings.Fields(how)[1], "1/") {
			t.Errorf("agent-1 wrote %d bytes through PID 1's %s: past the bound", n, how)
		}
		total += n
	}
	for _, how := range []string{"reopen 1/1", "take 1/1"} {
		if _, ok := rep.Refused[how]; !ok {
			t.Errorf("%s was not refused (refused: %v)", how, rep.Refused)
		}
	}
	rate, burst := awsflock.DefaultLogRateKiB<<10, awsflock.LogBurstFactor*awsflock.DefaultLogRateKiB<<10
	if total < int64(10*(burst+rate*int(flood.Seconds()))) {
		t.Fatalf("agent-1 wrote %d bytes (%v): too little to test the bound", total, rep.Written)
	}
	time.Sleep(logbound.NoteEvery + 2*time.Second) // the note of what was held back
	after, err := engine.Logs(ctx, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	grew := len(after) - len(before)
	allowed := burst + int(float64(rate)*elapsed.Seconds()) + 8<<10 // and its notes
	t.Logf("written: %v; refused: %v", rep.Written, rep.Refused)
	t.Logf("agent-1 wrote %d bytes by %d ways in %s; its log grew %d bytes in %s (bound %d)", total, len(rep.Written), flood, grew, elapsed.Round(time.Millisecond), allowed)
	if grew > allowed {
		t.Errorf("agent-1's log grew %d bytes in %s, past the bound of %d", grew, elapsed, allowed)
	}
	var dropped float64
	for _, line := range strings.Split(after[len(before):], "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == logbound.NoteMsg {
			dropped += m["dropped_bytes"].(float64) + m["cut_bytes"].(float64)
		}
	}
	if dropped < float64(total)/2 {
		t.Errorf("the log's notes count %.0f bytes held back of the %d agent-1 wrote", dropped, total)
	}
	// The agent still works.
	if rs := results(t, runOperator(t, "task", "--agent", "agent-1", "--json", "--", "/flock-agent", "tool", "echo", "after the flood")); len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Errorf("agent-1 after the flood: %v", rs)
	}
}
