package metrics_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/metrics"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// emfValue finds the value of metric name in the document whose
// dimensions are exactly dims (Flock aside).
func emfValue(t *testing.T, out []byte, name string, dims map[string]string) (float64, bool) {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		set := cw["Dimensions"].([]any)[0].([]any)
		if len(set) != len(dims)+1 || doc["Flock"] != "flock-x" {
			continue
		}
		match := true
		for n, v := range dims {
			if doc[n] != v {
				match = false
			}
		}
		if v, ok := doc[name].(float64); match && ok {
			return v, true
		}
	}
	return 0, false
}

// On aws the same figures go to CloudWatch as EMF log lines: counters as
// what they counted since the last write, per agent or, at the flock
// level, summed with no agent dimension at all.
func TestEMFWritesTheExportersSeries(t *testing.T) {
	f := bustest.Start(t, bustest.Agents(2), bustest.WithoutServices())
	nc := f.Connect(t, protocol.ServicesUser)
	agents := []string{"agent-1", "agent-2"}
	e, err := metrics.Start(nc, bustest.JetStream(t, nc), metrics.Config{
		Agents: func() []string { return agents }, IsAgent: func(id string) bool { return slices.Contains(agents, id) }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	results := func(id string, n int) {
		for range n {
			publish(t, f, id, protocol.ResultSubject(id), protocol.Result{V: 1, Agent: id, Status: protocol.StatusOK, DurationMS: 10})
		}
	}
	waitText := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			text, _ := e.Gather()
			if strings.Contains(string(text), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the exporter never had %q:\n%s", want, text)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	results("agent-1", 2)
	results("agent-2", 1)
	waitText(`flock_tasks_total{agent="agent-1",status="ok"} 2`)
	waitText(`flock_tasks_total{agent="agent-2",status="ok"} 1`)

	if _, err := metrics.NewEMFWriter(e, "AIFlock", "flock-x", "everything"); err == nil || !strings.Contains(err.Error(), "flock, agents") {
		t.Fatalf("an unknown level: %v", err)
	}
	perAgent, err := metrics.NewEMFWriter(e, "AIFlock", "flock-x", metrics.EMFAgents)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := perAgent.Write(&out, time.Now()); err != nil {
		t.Fatal(err)
	}
	if v, ok := emfValue(t, out.Bytes(), "flock_tasks_total", map[string]string{"agent": "agent-1", "status": "ok"}); !ok || v != 2 {
		t.Fatalf("agent-1's tasks: %g %v\n%s", v, ok, out.String())
	}
	// Beside every agent's own, the flock's sum (what the dashboard shows).
	if v, ok := emfValue(t, out.Bytes(), "flock_tasks_total", map[string]string{"status": "ok"}); !ok || v != 3 {
		t.Fatalf("the flock's tasks at the agents' level: %g %v, want 3 (2 + 1)", v, ok)
	}
	results("agent-1", 3)
	waitText(`flock_tasks_total{agent="agent-1",status="ok"} 5`)
	out.Reset()
	if err := perAgent.Write(&out, time.Now()); err != nil {
		t.Fatal(err)
	}
	if v, ok := emfValue(t, out.Bytes(), "flock_tasks_total", map[string]string{"agent": "agent-1", "status": "ok"}); !ok || v != 3 {
		t.Fatalf("agent-1's tasks since the last write: %g %v, want 3", v, ok)
	}
	if v, ok := emfValue(t, out.Bytes(), "flock_task_duration_seconds_count", map[string]string{"agent": "agent-1"}); !ok || v != 3 {
		t.Fatalf("agent-1's task durations since the last write: %g %v, want 3", v, ok)
	}

	flockLevel, _ := metrics.NewEMFWriter(e, "AIFlock", "flock-x", metrics.EMFFlock)
	out.Reset()
	if err := flockLevel.Write(&out, time.Now()); err != nil {
		t.Fatal(err)
	}
	if v, ok := emfValue(t, out.Bytes(), "flock_tasks_total", map[string]string{"status": "ok"}); !ok || v != 6 {
		t.Fatalf("the flock's tasks: %g %v, want 6 (5 + 1)\n%s", v, ok, out.String())
	}
	if v, ok := emfValue(t, out.Bytes(), "flock_agents", nil); !ok || v != 2 {
		t.Fatalf("flock_agents: %g %v", v, ok)
	}
	if strings.Contains(out.String(), `"agent"`) || strings.Contains(out.String(), "FLOCK_MAIL_agent") {
		t.Fatalf("the flock level names an agent:\n%s", out.String())
	}
}
