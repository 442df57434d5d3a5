package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/worker"
)

// `flock-agent inbox ack` takes messages of the inbox the agent names
// (FLOCK_INBOX_DIR, else the agent's directory), each by ID or file, and
// says where each went or why not.
func TestInboxAck(t *testing.T) {
	shared := t.TempDir()
	inbox := filepath.Join(shared, "agents", "agent-2", "inbox")
	if err := os.MkdirAll(inbox, 0o700); err != nil {
		t.Fatal(err)
	}
	name := "20261126T000000.000000000Z-000001-inbox-m-1.json"
	if err := os.WriteFile(filepath.Join(inbox, name), []byte(`{"v":1,"from":"operator"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env map[string]string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"inbox"}, args...), func(k string) string { return env[k] }, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	env := map[string]string{"FLOCK_AGENT_ID": "agent-2", "FLOCK_SHARED_DIR": shared}
	if code, out, errOut := run(env, "ack", "m-1"); code != cli.ExitOK || !strings.Contains(out, "taken m-1: "+filepath.Join("inbox", worker.TakenDir, name)) {
		t.Fatalf("ack by ID: %d %q %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(inbox, worker.TakenDir, name)); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(map[string]string{"FLOCK_INBOX_DIR": inbox}, "ack", "m-2"); code != cli.ExitTaskFailed || !strings.Contains(errOut, "no untaken message m-2") {
		t.Fatalf("ack of a message not there: %d %q", code, errOut)
	}
	if code, _, errOut := run(env, "ack", "../x"); code != cli.ExitUsage || !strings.Contains(errOut, "id:") {
		t.Fatalf("ack of a path: %d %q", code, errOut)
	}
	if code, _, errOut := run(env, "ack"); code != cli.ExitUsage || !strings.Contains(errOut, "usage") {
		t.Fatalf("ack of nothing: %d %q", code, errOut)
	}
	if code, _, errOut := run(map[string]string{}, "ack", "m-1"); code != cli.ExitUsage || !strings.Contains(errOut, "FLOCK_AGENT_ID") {
		t.Fatalf("no agent named: %d %q", code, errOut)
	}
}
