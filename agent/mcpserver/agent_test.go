package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

func agentServer(t *testing.T, tf *testFlock, id string, cfg mcpserver.AgentConfig) *mcp.ClientSession {
	t.Helper()
	cfg.ID, cfg.AgentDir = id, filepath.Join(tf.shared, "agents", id)
	return client(t, mcpserver.NewAgent(tf.f.Connect(t, id), cfg))
}

// firstFrom reads the inbox after cursor until a message from sender arrives.
func firstFrom(t *testing.T, cs *mcp.ClientSession, after, from string) (mcpserver.InboxMessage, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out := call[mcpserver.ReadInboxOut](t, cs, "read_inbox", map[string]any{"after": after, "wait_seconds": 2})
		for _, m := range out.Messages {
			if m.From == from {
				return m, m.File[len("inbox/"):]
			}
		}
		after = out.Next
	}
	t.Fatalf("no message from %s", from)
	return mcpserver.InboxMessage{}, ""
}

func TestAgentServerMessagesAPeerWithAVouchedSender(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 2)
	a1 := agentServer(t, tf, "agent-1", mcpserver.AgentConfig{})
	a2 := agentServer(t, tf, "agent-2", mcpserver.AgentConfig{})

	if got, want := toolNames(t, a1), []string{"board_add", "board_claim", "board_complete", "board_fail", "board_get_artifact", "board_list", "board_put_artifact", "board_release", "board_renew", "inbox_ack", "read_inbox", "roster", "send", "task_context"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v: an agent is offered nothing beyond its own bus permissions", got, want)
	}

	r := call[protocol.Receipt](t, a1, "send", map[string]any{"to": "agent-2", "body": "review PR 7", "data": map[string]any{"pr": 7}})
	if r.To != "agent-2" || r.From != "agent-1" || !strings.HasPrefix(r.File, "inbox/") || r.ID == "" {
		t.Fatalf("receipt %+v", r)
	}
	// The receipt names the file agent-2's runtime stored, with the sender
	// the bus vouched for.
	var st worker.Stored
	readJSON(t, filepath.Join(tf.shared, "agents", "agent-2", r.File), &st)
	if st.From != "agent-1" || st.Message.Body != "review PR 7" || st.Message.ID != r.ID {
		t.Fatalf("stored %+v", st)
	}

	m, cursor := firstFrom(t, a2, "", "agent-1")
	if m.Body != "review PR 7" || m.ID != r.ID || m.File != r.File || m.Kind != "inbox" {
		t.Fatalf("read_inbox %+v", m)
	}
	if d, ok := m.Data.(map[string]any); !ok || d["pr"] != float64(7) {
		t.Fatalf("data %#v", m.Data)
	}

	// Taken, it leaves the inbox (read_inbox lists untaken messages only).
	if ack := call[mcpserver.InboxAckOut](t, a2, "inbox_ack", map[string]any{"id": m.ID}); ack.File != filepath.Join("inbox", worker.TakenDir, filepath.Base(m.File)) {
		t.Fatalf("inbox_ack %+v", ack)
	}
	for _, left := range call[mcpserver.ReadInboxOut](t, a2, "read_inbox", map[string]any{"max": 100}).Messages {
		if left.ID == m.ID {
			t.Fatalf("read_inbox after the message was taken: %+v", left)
		}
	}
	callFails(t, a2, "inbox_ack", map[string]any{"id": "no-such"}, "id:", "no untaken message no-such")
	callFails(t, a2, "inbox_ack", map[string]any{"id": "../x.json"}, "id:", "without a path")

	// Nothing newer: an empty page, the cursor unchanged.
	out := call[mcpserver.ReadInboxOut](t, a2, "read_inbox", map[string]any{"after": cursor})
	if len(out.Messages) != 0 || out.Next != cursor {
		t.Fatalf("after the last message: %+v", out)
	}
	// A read that waits sees a message sent while it waits.
	done := make(chan mcpserver.ReadInboxOut, 1)
	go func() {
		done <- call[mcpserver.ReadInboxOut](t, a2, "read_inbox", map[string]any{"after": cursor, "wait_seconds": 10})
	}()
	time.Sleep(300 * time.Millisecond)
	call[protocol.Receipt](t, a1, "send", map[string]any{"to": "agent-2", "body": "second"})
	select {
	case out := <-done:
		if len(out.Messages) != 1 || out.Messages[0].Body != "second" || out.Messages[0].From != "agent-1" {
			t.Fatalf("waiting read: %+v", out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a waiting read_inbox never returned")
	}
	// agent-1's inbox holds nothing from agent-1's own sends.
	out = call[mcpserver.ReadInboxOut](t, a1, "read_inbox", map[string]any{})
	for _, m := range out.Messages {
		if m.From == "agent-1" {
			t.Fatalf("agent-1's inbox got its own message %+v", m)
		}
	}
}

func TestAgentServerRosterAndTaskContext(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 2)
	taskDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(taskDir, "task.json"), []byte(`{"v":1,"id":"t-1","command":"/bin/agent-program"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a1 := agentServer(t, tf, "agent-1", mcpserver.AgentConfig{TaskID: "t-1", TaskDir: taskDir, TaskAttempt: "2"})

	ro := call[mcpserver.RosterOut](t, a1, "roster", nil)
	if ro.Self != "agent-1" || !slices.Equal(ro.Agents, []string{"agent-1", "agent-2"}) {
		t.Fatalf("roster %+v", ro)
	}
	tc := call[mcpserver.TaskContextOut](t, a1, "task_context", nil)
	task, _ := tc.Task.(map[string]any)
	if !tc.InTask || tc.TaskID != "t-1" || tc.Attempt != "2" || tc.Dir != taskDir || task["command"] != "/bin/agent-program" {
		t.Fatalf("task_context %+v", tc)
	}
	a2 := agentServer(t, tf, "agent-2", mcpserver.AgentConfig{})
	if tc := call[mcpserver.TaskContextOut](t, a2, "task_context", nil); tc.InTask || tc.Agent != "agent-2" {
		t.Fatalf("outside a task: %+v", tc)
	}
}

func TestAgentServerRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 1)
	a1 := agentServer(t, tf, "agent-1", mcpserver.AgentConfig{})
	callFails(t, a1, "send", map[string]any{"body": "x"}, "missing properties", `"to"`) // the schema's own check
	callFails(t, a1, "send", map[string]any{"to": "", "body": "x"}, "to: required")
	callFails(t, a1, "send", map[string]any{"to": "Agent 2!", "body": "x"}, "to:", "not an agent ID")
	callFails(t, a1, "send", map[string]any{"to": "agent-2"}, "body:")
	callFails(t, a1, "send", map[string]any{"to": "agent-2", "body": strings.Repeat("x", mcpserver.MaxBodyBytes+1)}, "body:", "at most")
	callFails(t, a1, "send", map[string]any{"to": "agent-2", "body": "x", "id": "../../etc"}, "id:")
	callFails(t, a1, "send", map[string]any{"to": "agent-2", "body": "x", "wait_seconds": -1}, "wait_seconds:")
	callFails(t, a1, "send", map[string]any{"to": 5, "body": "x"}, "to")                                                            // wrong type: the schema says so
	callFails(t, a1, "send", map[string]any{"to": "agent-9", "body": "x"}, `no such agent: the bus keeps no mailbox for "agent-9"`) // no such agent: an error, not silence
	// A message ID sent again within the mailbox's window: a duplicate, never "queued".
	call[protocol.Receipt](t, a1, "send", map[string]any{"to": "agent-1", "body": "x", "id": "dup-1", "wait_seconds": 0.1})
	callFails(t, a1, "send", map[string]any{"to": "agent-1", "body": "x", "id": "dup-1", "wait_seconds": 0.1}, "duplicate:", "dropped this one")
	callFails(t, a1, "read_inbox", map[string]any{"max": 1000}, "max:")
	callFails(t, a1, "read_inbox", map[string]any{"after": "../../agent-2/inbox/x.json"}, "after:")
	callFails(t, a1, "read_inbox", map[string]any{"wait_seconds": 301}, "wait_seconds:")
	// The server is still up and answering.
	call[mcpserver.RosterOut](t, a1, "roster", nil)
}

// The real command, as an agent program starts it inside its container: a
// subprocess on stdio, configured by the variables the agent gives its tasks.
func TestAgentServerOverStdio(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 2)
	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = []string{"FLOCK_MCP_TEST_CLI=1", "FLOCK_AGENT_ID=agent-1", "FLOCK_NATS_URL=" + tf.f.URL,
		"FLOCK_NKEY_FILE=" + tf.f.SeedFile(t, "agent-1"), "FLOCK_SHARED_DIR=" + tf.shared}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent-program", Version: "v0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r := call[protocol.Receipt](t, cs, "send", map[string]any{"to": "agent-2", "body": "over stdio"})
	var st worker.Stored
	readJSON(t, filepath.Join(tf.shared, "agents", "agent-2", r.File), &st)
	if st.From != "agent-1" || st.Message.Body != "over stdio" {
		t.Fatalf("stored %+v", st)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("the server did not exit cleanly when its client closed stdin: %v", cmd.ProcessState)
	}
}
