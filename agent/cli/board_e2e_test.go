package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The board end to end: the real service in a real bus, with the bus's
// permissions. The operator applies a plan file; agent-1, in its own
// environment with its own key, claims and completes its tasks; plan wait
// sees the plan done.
func TestBoardEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bus")
	}
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	opEnv := map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, protocol.OperatorUser)}
	agentEnv := map[string]string{"FLOCK_AGENT_ID": "agent-1", "FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, "agent-1")}
	file := filepath.Join(t.TempDir(), "e2e.yaml")
	if err := os.WriteFile(file, []byte(`tasks:
  - id: spec
    title: Write the spec
    prompt: Write the spec.
  - id: build
    run: [make, all]
    needs: [spec]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runIn(opEnv, "plan", "apply", file)
	if code != cli.ExitOK || !strings.Contains(out, "created   e2e/spec (ready)") || !strings.Contains(out, "created   e2e/build (blocked)") || !strings.Contains(out, "plan e2e: 2 tasks: 2 created") {
		t.Fatalf("apply: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runIn(opEnv, "plan", "apply", file); code != cli.ExitOK || !strings.Contains(out, "2 unchanged") {
		t.Fatalf("apply again: exit %d, %q", code, out)
	}
	// A dry run of an edit says what it would do, and does none of it.
	edited := filepath.Join(t.TempDir(), "e2e.yaml")
	if err := os.WriteFile(edited, []byte("tasks:\n  - id: spec\n    prompt: Write the spec.\n  - id: docs\n    prompt: Write the docs.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runIn(opEnv, "plan", "apply", "--dry-run", edited); code != cli.ExitOK ||
		out != "updated   e2e/spec (ready)\ncreated   e2e/docs (ready)\ncancelled e2e/build (cancelled)\nplan e2e (dry run: nothing written): 3 tasks: 1 created, 1 updated, 1 cancelled\n" {
		t.Fatalf("dry run: exit %d, %q %q", code, out, errOut)
	}
	if code, out, _ := runIn(opEnv, "plan", "apply", "--dry-run", file); code != cli.ExitOK || !strings.Contains(out, "2 tasks: 2 unchanged") {
		t.Fatalf("the dry run wrote: exit %d, %q", code, out)
	}

	claim := func(args ...string) protocol.BoardReply {
		t.Helper()
		code, out, errOut := runIn(agentEnv, append([]string{"board", "claim", "--json"}, args...)...)
		var rep protocol.BoardReply
		if err := json.Unmarshal([]byte(out), &rep); code != cli.ExitOK || err != nil || rep.Task == nil {
			t.Fatalf("claim %v: exit %d, %q %q", args, code, out, errOut)
		}
		return rep
	}
	rep := claim("--plan", "e2e")
	if rep.Task.ID != "spec" || rep.Task.Holder != "agent-1" || rep.Task.Status != protocol.BoardClaimed {
		t.Fatalf("claimed %+v", rep.Task)
	}
	// The one ready task is held: nothing more for agent-1 now.
	if code, _, errOut := runIn(agentEnv, "board", "claim", "--plan", "e2e"); code != cli.ExitTaskFailed {
		t.Fatalf("second claim: exit %d, %q", code, errOut)
	}
	if code, out, errOut := runIn(agentEnv, "board", "complete", "e2e", "spec", "--summary", "spec written", "--artifact", "spec.md"); code != cli.ExitOK || !strings.Contains(out, "completed e2e/spec done") {
		t.Fatalf("complete: exit %d, %q %q", code, out, errOut)
	}
	// The operator may not do the agent's part, nor an agent another's.
	if code, _, _ := runIn(opEnv, "board", "complete", "e2e", "build", "--summary", "x"); code == cli.ExitOK {
		t.Fatal("the operator completed a task as an agent")
	}

	rep = claim("--kind", "run")
	if rep.Task.ID != "build" || len(rep.Context) != 1 || rep.Context[0].ID != "spec" || rep.Context[0].Result == nil || rep.Context[0].Result.Summary != "spec written" {
		t.Fatalf("claimed %+v with context %+v", rep.Task, rep.Context)
	}
	if code, _, errOut := runIn(agentEnv, "board", "complete", "e2e", "build", "--summary", "built"); code != cli.ExitOK {
		t.Fatalf("complete build: exit %d, %q", code, errOut)
	}

	if code, out, errOut := runIn(opEnv, "plan", "wait", file, "--timeout", "10s"); code != cli.ExitOK || !strings.Contains(out, "plan e2e: all 2 tasks done") {
		t.Fatalf("wait: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = runIn(opEnv, "board", "show", "e2e", "spec")
	if code != cli.ExitOK || !strings.Contains(out, "summary   spec written") || !strings.Contains(out, "artifacts spec.md") {
		t.Fatalf("show: exit %d, %q", code, out)
	}
	if code, out, _ := runIn(agentEnv, "board", "list", "--plan", "e2e"); code != cli.ExitOK || strings.Count(out, " done ") != 2 {
		t.Fatalf("list as the agent: exit %d, %q", code, out)
	}
}
