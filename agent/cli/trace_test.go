package cli_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
)

// A traced caller (TRACEPARENT, as a task's own process has it) sends its
// task in its trace: the agent runs it in the same trace; a malformed one
// is a warning, and the task runs in a trace of its own.
func TestTaskCarriesTheCallersTrace(t *testing.T) {
	e := liveFlock(t, 1)
	self, _ := os.Executable()
	parent := protocol.NewTrace()
	e.env[protocol.EnvTraceparent] = parent.String()
	code, out, errOut := e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "0")
	var r protocol.Result
	if code != cli.ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil || r.Trace != parent.Trace() {
		t.Fatalf("exit %d, result %s (%s): want trace %s", code, out, errOut, parent.Trace())
	}
	e.env[protocol.EnvTraceparent] = "00-zz-1-01"
	code, out, errOut = e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "0")
	r = protocol.Result{}
	if code != cli.ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil || r.Trace == "" || r.Trace == parent.Trace() ||
		!strings.Contains(errOut, "TRACEPARENT ignored") {
		t.Fatalf("a malformed TRACEPARENT: exit %d, %s, %q", code, out, errOut)
	}
}
