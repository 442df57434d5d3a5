package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/tests/agentcli"
	"github.com/ai-flock/ai-flock/tests/agenttest"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The test binary doubles as flock-agent (FLOCK_MCP_TEST_CLI=1), so the
// stdio servers are tested as a client on the operator's machine or an
// agent program in a container starts them: a subprocess on stdin/stdout.
func TestMain(m *testing.M) { agentcli.Main(m, "FLOCK_MCP_TEST_CLI") }

// testFlock is a real bus with running agents sharing one directory.
type testFlock struct {
	f      *bustest.Bus
	shared string
}

func startFlock(t *testing.T, agents int) *testFlock {
	t.Helper()
	tf := &testFlock{f: bustest.Start(t, bustest.Agents(agents)), shared: t.TempDir()}
	for i := 1; i <= agents; i++ {
		agenttest.Run(t, agenttest.Config(t, tf.f, "agent-"+string(rune('0'+i)), tf.shared), nil)
	}
	tf.waitReady(t, agents)
	return tf
}

// waitReady waits until every agent's status file says it is connected
// and its inbox exists (it stores messages from then on).
func (tf *testFlock) waitReady(t *testing.T, n int) {
	t.Helper()
	op := tf.f.Connect(t, "operator")
	deadline := time.Now().Add(15 * time.Second)
	for i := 1; i <= n; i++ {
		id := "agent-" + string(rune('0'+i))
		for {
			// The pool consumer has an open pull request from each ready agent.
			if _, err := os.Stat(filepath.Join(tf.shared, "agents", id, "inbox")); err == nil {
				if _, err := op.Request("agent."+id+".inbox.operator", []byte(`{"v":1,"id":"ping","body":"ready?"}`), time.Second); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became ready", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// client connects an SDK client to s over in-memory transports.
func client(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// call calls a tool that must succeed and decodes its structured output.
func call[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) T {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error: %s", name, args, text(res))
	}
	var out T
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: output %s: %v", name, b, err)
	}
	return out
}

// callFails calls a tool that must return a tool error mentioning every want.
func callFails(t *testing.T, cs *mcp.ClientSession, name string, args any, want ...string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): a protocol error, want a tool error: %v", name, args, err)
	}
	msg := text(res)
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded: %s", name, args, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s(%v): error %q does not say %q", name, args, msg, w)
		}
	}
	return msg
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
