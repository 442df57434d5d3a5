package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The operator reads the trail as JSON lines, filtered, and verifies it;
// an entry deleted through the JetStream API fails the verification.
func TestAuditExportsAndVerifiesTheTrail(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 2)
	self, _ := os.Executable()
	if code, _, errOut := e.run(t, "task", "--agent", "agent-2", "--id", "audited-1", "--", self, "tool", "exit", "3"); code != cli.ExitTaskFailed {
		t.Fatalf("the failing task: exit %d: %s", code, errOut)
	}
	var lines []protocol.AuditEntry
	testkit.WaitFor(t, 10*time.Second, "the task's result in the trail", func() bool {
		code, out, _ := e.run(t, "audit", "--agent", "agent-2", "--kind", protocol.AuditTaskResult)
		lines = nil
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var en protocol.AuditEntry
			if json.Unmarshal([]byte(l), &en) == nil {
				lines = append(lines, en)
			}
		}
		return code == cli.ExitOK && len(lines) == 1
	})
	if l := lines[0]; l.Who != "agent-2" || l.What != "audited-1" || l.Outcome != protocol.StatusFailed {
		t.Fatalf("the result's entry: %+v", l)
	}
	code, out, errOut := e.run(t, "audit", "--since", "1h", "--kind", protocol.AuditTaskSent)
	if code != cli.ExitOK || !strings.Contains(out, `"what":"audited-1"`) || !strings.Contains(out, `"who":"operator"`) {
		t.Fatalf("since 1h: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = e.run(t, "audit", "verify")
	head := regexp.MustCompile(`--anchor (\d+:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != cli.ExitOK || !strings.Contains(out, "ok: the trail is whole") || head == nil {
		t.Fatalf("verify: exit %d: %s", code, out)
	}
	if code, out, _ = e.run(t, "audit", "verify", "--anchor", head[1]); code != cli.ExitOK {
		t.Fatalf("verify against the head it printed: exit %d: %s", code, out)
	}

	// Bad input: a clear error naming the flag, before anything is read.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"audit", "--since", "yesterday"}, cli.ExitUsage, "--since: want a duration"},
		{[]string{"audit", "--since", "2999-01-01T00:00:00Z"}, cli.ExitUsage, "in the future"},
		{[]string{"audit", "--kind", "tasks"}, cli.ExitUsage, "--kind: one of"},
		{[]string{"audit", "--agent", "../etc"}, cli.ExitUsage, "--agent"},
		{[]string{"audit", "--agent", "agent-9"}, cli.ExitUnknownAgent, "agent-9 is not an agent of the flock"},
		{[]string{"audit", "verify", "--anchor", "3:nothex"}, cli.ExitUsage, "SEQ:HASH"},
	} {
		code, _, errOut := e.run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}

	// The trail full: the task's entries are refused, counted, and
	// verify says so (exit 1, intact but not whole).
	op := e.f.Connect(t, protocol.OperatorUser)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := bustest.JetStream(t, op)
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, roomy := info.Config, info.Config
	full.MaxBytes = int64(info.State.Bytes)
	if _, err := js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := e.run(t, "task", "--agent", "agent-2", "--id", "unrecorded-1", "--", self, "tool", "exit", "0"); code != cli.ExitOK {
		t.Fatalf("the task while the trail is full: exit %d: %s", code, errOut)
	}
	testkit.WaitFor(t, 10*time.Second, "verify to say the task's entries are not recorded", func() bool {
		code, out, _ = e.run(t, "audit", "verify")
		return code == cli.ExitTaskFailed && strings.Contains(out, "not recorded: 2 entries not recorded since entry") && strings.Contains(out, "not whole: intact, but 2 entries are not in it")
	})
	if strings.Contains(out, "problem:") {
		t.Fatalf("verify with entries not recorded names a problem: %s", out)
	}
	if _, err := js.UpdateStream(ctx, roomy); err != nil {
		t.Fatal(err)
	}

	// An entry deleted by someone holding the JetStream API.
	if err := stream.DeleteMsg(ctx, stream.CachedInfo().State.FirstSeq); err != nil {
		t.Fatal(err)
	}
	// Against the head kept from before: caught, whether the message held
	// some entries (deleted) or all of them (cut off).
	code, out, _ = e.run(t, "audit", "verify", "--anchor", head[1])
	if code != cli.ExitTaskFailed || !regexp.MustCompile(`problem: entries 1( to \d+)?: (deleted \(retention has removed nothing\)|truncated)`).MatchString(out) {
		t.Fatalf("verify after a deletion: exit %d: %s", code, out)
	}
}
