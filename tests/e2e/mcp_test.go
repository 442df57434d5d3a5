package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// An agent program inside agent-1 (a task started through the bus) uses
// `flock-agent mcp` to message agent-2; an agent program inside agent-2
// reads it over MCP with the sender the bus vouched for.
func TestAgentsMessageOverMCP(t *testing.T) {
	f, a1, a2 := needTwo(t)
	_, js, rs := jsResults(t)

	// mcpTask runs the probe as an agent program calling one MCP tool.
	mcpTask := func(agent, tool string, args any) string {
		t.Helper()
		b, _ := json.Marshal(args)
		id := taskID(t, agent+"-"+strings.ReplaceAll(tool, "_", "-"))
		publish(t, js, protocol.TaskSubject(agent), protocol.Task{ID: id, Kind: protocol.KindExec, Command: f.probe[agent], Args: []string{"mcp", tool, string(b)}})
		r := rs.collect(t, 60*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) > 0 })[id][0]
		if !r.OK() {
			t.Fatalf("%s on %s: %+v", tool, agent, r)
		}
		if r.Truncated { // a result carries 32 KiB inline; the task's directory has it all
			return string(readFile(t, filepath.Join(f.sharedRoot, "agents", agent, "tasks", id, "stdout")))
		}
		return r.Stdout
	}

	body := "hello over MCP " + time.Now().Format(time.RFC3339Nano)
	var rc protocol.Receipt
	if err := json.Unmarshal([]byte(mcpTask(a1, "send", map[string]any{"to": a2, "body": body})), &rc); err != nil {
		t.Fatal(err)
	}
	if rc.From != a1 || rc.To != a2 || rc.File == "" {
		t.Fatalf("receipt %+v", rc)
	}
	var st worker.Stored
	readJSONFile(t, filepath.Join(f.sharedRoot, "agents", a2, rc.File), &st)
	if st.From != a1 || st.Message.Body != body {
		t.Fatalf("agent-2 stored %+v", st)
	}

	// Read from just before it: agent-2's inbox may hold hundreds of
	// messages already (the hostile inbox flood ran first).
	after := ""
	entries, err := os.ReadDir(filepath.Join(f.sharedRoot, "agents", a2, "inbox"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries { // sorted by name, oldest first
		if n := e.Name(); strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") && n < filepath.Base(rc.File) {
			after = n
		}
	}
	var inbox mcpserver.ReadInboxOut
	if err := json.Unmarshal([]byte(mcpTask(a2, "read_inbox", map[string]any{"after": after, "wait_seconds": 5, "max": 100})), &inbox); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range inbox.Messages {
		if m.ID == rc.ID {
			found = m.From == a1 && m.Body == body
		}
	}
	if !found {
		t.Fatalf("agent-2 read no message %s from %s over MCP: %+v", rc.ID, a1, inbox)
	}

	var ro mcpserver.RosterOut
	if err := json.Unmarshal([]byte(mcpTask(a1, "roster", map[string]any{})), &ro); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(f.agents)
	slices.Sort(want)
	if ro.Self != a1 || !slices.Equal(ro.Agents, want) {
		t.Fatalf("roster %+v, want %v", ro, want)
	}
	t.Logf("agent-1 -> agent-2 over MCP: %s stored as %s, sender %s", rc.ID, rc.File, st.From)
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(readFile(t, path), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
