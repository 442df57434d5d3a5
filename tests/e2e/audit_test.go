package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// The audit trail the services write in their container: a task sent to
// agent-1 and agent-1's answer, taken from the bus, and the trail whole.
func TestTheAuditTrailRecordsTheFlock(t *testing.T) {
	cl := operatorClient(t)
	ctx := testContext(t, 60*time.Second)
	id := taskID(t, "audit")
	if _, err := cl.Run(ctx, operator.Target{Agent: "agent-1"}, taskExec(id, "exit", "0"), nil); err != nil {
		t.Fatalf("the task: %v", err)
	}
	var sent, answered bool
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !(sent && answered); time.Sleep(500 * time.Millisecond) {
		sent, answered = false, false
		err := audit.Each(ctx, cl.JetStream(), audit.Filter{Agent: "agent-1"}, func(_ uint64, _ []byte, e protocol.AuditEntry) error {
			if e.What != id {
				return nil
			}
			sent = sent || (e.Kind == protocol.AuditTaskSent && e.Who == protocol.OperatorUser && e.Agent == "agent-1")
			answered = answered || (e.Kind == protocol.AuditTaskResult && e.Who == "agent-1" && e.Outcome == protocol.StatusOK)
			return nil
		})
		if err != nil {
			t.Fatalf("read the trail: %v", err)
		}
	}
	if !sent || !answered {
		t.Fatalf("the trail holds the task sent: %v, answered by agent-1: %v", sent, answered)
	}
	r, err := audit.Verify(ctx, cl.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("the trail is not whole: %q", r.Problems)
	}
	t.Logf("%d entries, %d to %d, anchors %d", r.Entries, r.First, r.Last, len(r.Anchors))
}

// agent-1 floods the audit trail from inside its container with its own
// key: for 45 s, as fast as the bus reads it, results whose task ID is
// 11,000 '<' (JSON writes each as six bytes: an entry keeping it would be
// 66 KB, past the trail's 64 KiB message) and every tenth time a message to
// agent-2 with such an ID, while the operator sends agent-2 five tasks. The
// e2e flock's trail is 16 MiB (flock:audit.maxMiB), so agent-1's share of it
// runs out within the flood. Afterwards: the operator's five tasks are in
// the trail; no entry holds agent-1's IDs and none is over the entry bound;
// every result and message agent-1 published is an entry or counted by a
// record (over its share, or missed), over-share among them; the services
// were neither restarted nor OOM-killed; and `audit verify` exits 1 saying
// what went unrecorded, its count moved by the records' counts.
func TestHostileAuditFlood(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f, a1, a2 := needTwo(t)
	cl := operatorClient(t)
	services := f.name + "-services"
	state := func() (restarts float64, oom bool, started string) {
		doc := inspect(t, services)
		st := doc["State"].(map[string]any)
		return doc["RestartCount"].(float64), st["OOMKilled"] == true, st["StartedAt"].(string)
	}
	restarts0, _, started0 := state()
	_, before, _ := verifyWithTheCLI(t, f)
	since := time.Now().Add(-time.Second)

	const flood = 45 * time.Second
	done := probeAsync(a1, flood+3*time.Minute, "flood-audit", "nats://bus:4222", protocol.ContainerCredsFile, a2, flood.String())
	var sent []string
	for i := range 5 {
		time.Sleep(flood / 6)
		id := taskID(t, fmt.Sprint("op", i))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cl.Run(ctx, operator.Target{Agent: a2}, taskEcho(id, "during the flood"), nil)
		cancel()
		if err != nil || len(res) != 1 || !res[0].OK() {
			t.Errorf("the operator's task %d to agent-2 during the flood: %v %+v", i, err, res)
		}
		sent = append(sent, id)
	}
	r := <-done
	if r.err != nil || r.code != 0 {
		t.Fatalf("the flood: exit %d %v %q %q", r.code, r.err, r.out, r.stderr)
	}
	m := regexp.MustCompile(`published (\d+) results and (\d+) messages`).FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("the flood said %q", r.out)
	}
	published := atoi(m[1]) + atoi(m[2])
	t.Logf("agent-1: %s", strings.TrimSpace(r.out))

	// What the trail holds since the flood began.
	type line struct {
		Who, Kind, Agent, What string
		Count                  int64
	}
	type tally struct {
		entries         int   // agent-1's results and messages recorded
		own, unknown    int64 // counted by records naming agent-1, or no sender
		overShare       int64
		seen            map[string]bool // the operator's tasks recorded
		kept, oversized []string
	}
	read := func() tally {
		tl := tally{seen: map[string]bool{}}
		ctx := testContext(t, 60*time.Second)
		err := audit.Each(ctx, cl.JetStream(), audit.Filter{Since: since}, func(_ uint64, raw []byte, _ protocol.AuditEntry) error {
			var l line
			if err := json.Unmarshal(raw, &l); err != nil {
				return err
			}
			if len(raw) > maxAuditEntry {
				tl.oversized = append(tl.oversized, fmt.Sprintf("%s %s (%d bytes)", l.Who, l.Kind, len(raw)))
			}
			switch {
			case l.Who == a1 && (l.Kind == protocol.AuditTaskResult || l.Kind == protocol.AuditMessage):
				tl.entries++
				if strings.Contains(l.What, "<<") {
					tl.kept = append(tl.kept, l.Kind)
				}
			case strings.HasPrefix(l.Kind, "audit.") && l.Agent == a1:
				tl.own += l.Count
				if l.Kind == "audit.overshare" {
					tl.overShare += l.Count
				}
			case strings.HasPrefix(l.Kind, "audit.") && l.Agent == "":
				tl.unknown += l.Count
			case l.Who == protocol.OperatorUser && l.Kind == protocol.AuditTaskSent && l.Agent == a2:
				tl.seen[l.What] = true
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read the trail: %v", err)
		}
		return tl
	}
	// The writer says what went over a share at its next summary (at most
	// protocol.AuditAnchorEvery after the flood).
	var tl tally
	deadline := time.Now().Add(protocol.AuditAnchorEvery + 30*time.Second)
	for tl = read(); time.Now().Before(deadline) && tl.entries+int(tl.own+tl.unknown) < published; tl = read() {
		time.Sleep(2 * time.Second)
	}
	t.Logf("the trail since the flood: %d of agent-1's entries, %d counted by records naming agent-1 (%d over its share), %d by records naming no sender; of %d published",
		tl.entries, tl.own, tl.overShare, tl.unknown, published)
	for _, id := range sent {
		if !tl.seen[id] {
			t.Errorf("the operator's task %s to agent-2 is not in the trail", id)
		}
	}
	if len(tl.kept) > 0 {
		t.Errorf("%d of agent-1's entries keep its ID (%v...)", len(tl.kept), tl.kept[0])
	}
	if len(tl.oversized) > 0 {
		t.Errorf("%d entries over %d bytes: %v", len(tl.oversized), maxAuditEntry, tl.oversized[:min(3, len(tl.oversized))])
	}
	if got := tl.entries + int(tl.own+tl.unknown); got < published || tl.entries+int(tl.own) > published {
		t.Errorf("agent-1 published %d; the trail has %d entries and counts %d naming it and %d naming no sender: each must be one or the other", published, tl.entries, tl.own, tl.unknown)
	}
	// The e2e flock's trail is 16 MiB, so the flood goes over agent-1's
	// share; a flock deployed with its own config (layer 3: the default
	// trail) may hold the whole flood.
	if tl.overShare == 0 && f.replayed != nil {
		t.Errorf("no record says agent-1 went over its share of the trail")
	}

	restarts, oom, started := state()
	if restarts != restarts0 || oom || started != started0 {
		t.Errorf("the services: restarted %v times (before %v), OOM-killed %v, started %s (before %s)", restarts, restarts0, oom, started, started0)
	}
	t.Logf("the services' memory at its peak: %s", memoryPeak(t, services))

	// What verify counts as not recorded since the flood decides what it
	// must say: records the tally above did not wait for (the bus client's
	// drops on agent-2's inbox, say, named by subject, not sender) count too.
	code, after, out := verifyWithTheCLI(t, f)
	lost := after.NotRecorded - before.NotRecorded
	switch {
	case lost == 0 && len(before.Gaps) == 0 && (code != cli.ExitOK || len(after.Problems) != 0 || len(after.Gaps) != 0):
		t.Errorf("audit verify after a flood the trail held whole: exit %d, problems %q, gaps %q; want 0 and none:\n%s", code, after.Problems, after.Gaps, out)
	case lost > 0 && (code != cli.ExitTaskFailed || len(after.Problems) != 0):
		t.Errorf("audit verify after the flood (%d not recorded): exit %d, problems %q; want 1 and none (gaps only):\n%s", lost, code, after.Problems, out)
	case tl.own > 0 && !strings.Contains(strings.Join(after.Gaps, "\n"), a1):
		t.Errorf("audit verify names no gap of agent-1's: %q", after.Gaps)
	}
	if got, want := after.NotRecorded-before.NotRecorded, tl.own+tl.unknown; got < want {
		t.Errorf("audit verify counts %d more not recorded since the flood; the records say %d", got, want)
	}
	t.Logf("audit verify: exit %d; gaps: %q", code, after.Gaps)
}

// maxAuditEntry is the bound every entry of the trail keeps
// (protocol.MaxAuditEntry).
const maxAuditEntry = 1 << 10

// verifiedTrail is what `audit verify --json` reports.
type verifiedTrail struct {
	Problems, Gaps []string
	NotRecorded    int64
}

// verifyWithTheCLI runs `flock-agent audit verify --json` as the operator.
func verifyWithTheCLI(t *testing.T, f *flockUnderTest) (int, verifiedTrail, string) {
	t.Helper()
	code, out, errOut := runCLI(t, f, "audit", "verify", "--json")
	var r verifiedTrail
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("audit verify: exit %d, %q %q: %v", code, out, errOut, err)
	}
	return code, r, out
}

// runCLI runs flock-agent as the operator of f: its exit code, stdout and
// stderr.
func runCLI(t *testing.T, f *flockUnderTest, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) string {
		switch k {
		case protocol.EnvCLINATSURL:
			return f.busURL
		case protocol.EnvCLINkeySeed:
			return f.seed
		}
		return ""
	}
	code := cli.Main(testContext(t, 2*time.Minute), args, env, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

// memoryPeak is the most memory a container's cgroup used (as the host's
// cgroup says, v1 or v2), or why it is not known.
func memoryPeak(t *testing.T, name string) string {
	id := inspect(t, name)["Id"].(string)
	for _, p := range []string{
		"/sys/fs/cgroup/memory/docker/" + id + "/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/memory/system.slice/docker-" + id + ".scope/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.peak",
		"/sys/fs/cgroup/docker/" + id + "/memory.peak",
	} {
		if b, err := os.ReadFile(p); err == nil {
			n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		}
	}
	return "not known (no cgroup file)"
}
