package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/boardtest"
)

// boardEnv is a fake board and the two environments its clients run in:
// the operator's machine and agent-1's task.
type boardEnv struct {
	fake            *boardtest.Fake
	operator, agent map[string]string
}

func startBoard(t *testing.T) *boardEnv {
	t.Helper()
	f := boardtest.Start(t)
	return &boardEnv{
		fake:     f,
		operator: map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.Seeds[protocol.OperatorUser]},
		agent:    map[string]string{"FLOCK_AGENT_ID": boardtest.Agent, "FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.Seeds[boardtest.Agent]},
	}
}

func runIn(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, func(k string) string { return env[k] }, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// one returns the only request the fake received, checking its subject.
func one(t *testing.T, f *boardtest.Fake, subject string) protocol.BoardRequest {
	t.Helper()
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Subject != subject {
		t.Fatalf("requests %+v, want one on %s", reqs, subject)
	}
	if reqs[0].Body.V != protocol.Version {
		t.Fatalf("request without the protocol version: %s", reqs[0].Raw)
	}
	return reqs[0].Body
}

func task(plan, id, status string, needs ...string) protocol.BoardTask {
	return protocol.BoardTask{V: 1, Plan: plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: id, Prompt: "p", Needs: needs}, Status: status}
}

func TestPlanApplySendsTheFileAndPrintsEachChange(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	file := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(file, []byte("tasks:\n  - id: build\n    run: [make, images]\n    timeout: 5m\n  - id: review\n    prompt: Review it.\n    needs: [build]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	changes := []protocol.BoardChange{
		{Task: "build", Change: protocol.BoardCreated, Status: protocol.BoardReady},
		{Task: "review", Change: protocol.BoardKept, Status: protocol.BoardClaimed, Why: "agent-1 holds it"},
		{Task: "old", Change: protocol.BoardRemoved, Status: protocol.BoardCancelled},
	}
	e.fake.Handle(func(boardtest.Request) protocol.BoardReply { return protocol.BoardReply{Changes: changes} })

	code, out, errOut := runIn(e.operator, "plan", "apply", file)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpApply))
	want := []protocol.BoardTaskSpec{
		{ID: "build", Run: []string{"make", "images"}, Timeout: protocol.Duration(5 * time.Minute)},
		{ID: "review", Prompt: "Review it.", Needs: []string{"build"}},
	}
	if req.Plan != "release" || !reflect.DeepEqual(req.Tasks, want) {
		t.Fatalf("sent plan %q tasks %+v", req.Plan, req.Tasks)
	}
	for _, w := range []string{"created   release/build (ready)\n", "kept      release/review (claimed): agent-1 holds it\n",
		"cancelled release/old (cancelled)\n", "plan release: 3 tasks: 1 created, 1 kept, 1 cancelled\n"} {
		if !strings.Contains(out, w) {
			t.Fatalf("output %q lacks %q", out, w)
		}
	}

	code, out, _ = runIn(e.operator, "plan", "apply", "--json", file)
	var got struct {
		Plan    string
		Changes []protocol.BoardChange
		Counts  map[string]int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != cli.ExitOK {
		t.Fatalf("exit %d, %q: %v", code, out, err)
	}
	if got.Plan != "release" || !reflect.DeepEqual(got.Changes, changes) || got.Counts["kept"] != 1 {
		t.Fatalf("JSON %+v", got)
	}
	e.fake.Requests()

	// The service's refusal: its message and code, exit 1, nothing else.
	e.fake.Handle(func(boardtest.Request) protocol.BoardReply {
		return boardtest.Refuse(protocol.BoardErrInvalid, "task review: needs build, which needs review: a cycle build -> review -> build")
	})
	code, out, errOut = runIn(e.operator, "plan", "apply", file)
	if code != cli.ExitTaskFailed || out != "" || !strings.Contains(errOut, "a cycle build -> review -> build (invalid)") {
		t.Fatalf("refused: exit %d, out %q, err %q", code, out, errOut)
	}

	// A bad file is refused before the bus: no request.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("tasks:\n  - id: a\n    run: make all\n"), 0o600)
	e.fake.Requests()
	if code, _, errOut := runIn(e.operator, "plan", "apply", bad); code != cli.ExitUsage || !strings.Contains(errOut, "line 3: run: a list") {
		t.Fatalf("bad file: exit %d, %q", code, errOut)
	}
	if code, _, _ := runIn(e.operator, "plan", "apply", filepath.Join(t.TempDir(), "missing.yaml")); code != cli.ExitUsage {
		t.Fatalf("missing file: exit %d", code)
	}
	if reqs := e.fake.Requests(); len(reqs) != 0 {
		t.Fatalf("a bad file reached the board: %+v", reqs)
	}

	// No board service answering: a bus error.
	e.fake.Stop()
	if code, _, errOut := runIn(e.operator, "plan", "apply", file); code != cli.ExitBus || !strings.Contains(errOut, "no board service") {
		t.Fatalf("no service: exit %d, %q", code, errOut)
	}
}

func TestBoardOperatorCommands(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	exit := 0
	done := task("p", "build", protocol.BoardDone)
	done.Title, done.Attempts, done.Holder, done.CreatedBy = "Build the images", 1, "agent-1", "operator"
	done.Result = &protocol.BoardResult{Summary: "built 3 images", Artifacts: []string{"images.txt"}, ExitCode: &exit}
	claimed := task("p", "review", protocol.BoardClaimed, "build")
	claimed.Holder, claimed.LeaseUntil = "agent-2", time.Now().Add(5*time.Minute)
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Op {
		case protocol.BoardOpList:
			return protocol.BoardReply{Tasks: []protocol.BoardTask{done, claimed}}
		case protocol.BoardOpShow:
			return protocol.BoardReply{Task: &done}
		case protocol.BoardOpCancel:
			t := claimed
			t.Status, t.Holder, t.Reason = protocol.BoardCancelled, "", r.Body.Reason
			return protocol.BoardReply{Task: &t}
		case protocol.BoardOpRetry:
			return boardtest.Refuse(protocol.BoardErrNotReady, "p.review is claimed: only a failed or cancelled task is retried")
		case protocol.BoardOpRemove:
			return protocol.BoardReply{Changes: []protocol.BoardChange{{Task: "build", Status: protocol.BoardDone, Change: protocol.BoardDeleted}}}
		}
		return boardtest.Refuse(protocol.BoardErrInvalid, "unexpected op "+r.Op)
	})

	code, out, _ := runIn(e.operator, "board", "list", "--plan", "p", "--status", "done,claimed")
	req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpList))
	if code != cli.ExitOK || req.Plan != "p" || !reflect.DeepEqual(req.Status, []string{"done", "claimed"}) {
		t.Fatalf("exit %d, request %+v", code, req)
	}
	for _, w := range []string{"PLAN", "AGE/LEASE", "build", "Build the images", "1/3", "agent-2", "left"} {
		if !strings.Contains(out, w) {
			t.Fatalf("table %q lacks %q", out, w)
		}
	}
	if code, out, _ := runIn(e.operator, "board", "list", "--json"); code != cli.ExitOK || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"holder":"agent-2"`) {
		t.Fatalf("list --json: exit %d, %q", code, out)
	}
	e.fake.Requests()
	if code, _, errOut := runIn(e.operator, "board", "list", "--status", "finished"); code != cli.ExitUsage || !strings.Contains(errOut, `"finished"`) {
		t.Fatalf("bad status: exit %d, %q", code, errOut)
	}

	code, out, _ = runIn(e.operator, "board", "show", "p", "build")
	if req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpShow)); code != cli.ExitOK || req.Plan != "p" || req.Task != "build" {
		t.Fatalf("exit %d, request %+v", code, req)
	}
	for _, w := range []string{"task      p/build", "status    done by agent-1", "summary   built 3 images", "artifacts images.txt", "exit code 0", "by operator"} {
		if !strings.Contains(out, w) {
			t.Fatalf("show %q lacks %q", out, w)
		}
	}

	// Flags after the positional arguments, as the usage writes them.
	code, out, _ = runIn(e.operator, "board", "cancel", "p", "review", "--reason", "not needed")
	if req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpCancel)); code != cli.ExitOK || req.Task != "review" || req.Reason != "not needed" {
		t.Fatalf("exit %d, request %+v", code, req)
	}
	if out != "cancelled p/review cancelled: not needed\n" {
		t.Fatalf("cancel: %q", out)
	}
	code, out, _ = runIn(e.operator, "plan", "remove", "p")
	if req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpRemove)); code != cli.ExitOK || req.Plan != "p" || out != "plan p: 1 task deleted from the board\n" {
		t.Fatalf("plan remove: exit %d, %q, request %+v", code, out, req)
	}
	code, _, errOut := runIn(e.operator, "board", "retry", "p", "review")
	if one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpRetry)); code != cli.ExitTaskFailed || !strings.Contains(errOut, "only a failed or cancelled task is retried (not-ready)") {
		t.Fatalf("retry refused: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"board", "show", "p"}, {"board", "retry", "p", "a", "b"}, {"board", "frob"}, {"board"}, {"plan", "apply"}, {"plan", "wait"}, {"board", "cancel", "p", "a", "--", "x"}} {
		if code, _, _ := runIn(e.operator, args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}

func TestBoardAgentCommands(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	held := task("p", "build", protocol.BoardClaimed)
	held.Holder, held.LeaseUntil = boardtest.Agent, time.Now().Add(10*time.Minute)
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Op {
		case protocol.BoardOpClaim:
			if r.Body.Plan == "empty" {
				return boardtest.Refuse(protocol.BoardErrNothing, "nothing ready for agent-1")
			}
			dep := task("p", "spec", protocol.BoardDone)
			dep.Result = &protocol.BoardResult{Summary: "the spec"}
			return protocol.BoardReply{Task: &held, Context: []protocol.BoardTask{dep}}
		case protocol.BoardOpAdd:
			t := task(r.Body.Plan, r.Body.Tasks[0].ID, protocol.BoardReady)
			return protocol.BoardReply{Task: &t}
		case protocol.BoardOpList:
			return protocol.BoardReply{Tasks: []protocol.BoardTask{held}}
		}
		t := held
		return protocol.BoardReply{Task: &t}
	})
	agentSubject := func(op string) string { return protocol.BoardAgentSubject(boardtest.Agent, op) }

	code, out, errOut := runIn(e.agent, "board", "claim", "--plan", "p", "--kind", "prompt")
	req := one(t, e.fake, agentSubject(protocol.BoardOpClaim))
	var claim struct {
		Task    protocol.BoardTask
		Context []protocol.BoardTask
	}
	if err := json.Unmarshal([]byte(out), &claim); err != nil || code != cli.ExitOK {
		t.Fatalf("claim: exit %d, %q %s: %v", code, out, errOut, err)
	}
	if req.Plan != "p" || req.Kind != "prompt" || req.Task != "" || claim.Task.ID != "build" || len(claim.Context) != 1 || claim.Context[0].Result.Summary != "the spec" {
		t.Fatalf("request %+v, claim %+v", req, claim)
	}
	if code, _, errOut := runIn(e.agent, "board", "claim", "--plan", "empty"); code != cli.ExitTaskFailed || !strings.Contains(errOut, "nothing ready for agent-1 (nothing)") {
		t.Fatalf("nothing to claim: exit %d, %q", code, errOut)
	}
	e.fake.Requests()

	code, out, _ = runIn(e.agent, "board", "complete", "p", "build", "--summary", "done it", "--artifact", "a.txt", "--artifact", "b.txt")
	req = one(t, e.fake, agentSubject(protocol.BoardOpComplete))
	if code != cli.ExitOK || req.Plan != "p" || req.Task != "build" || !reflect.DeepEqual(req.Result, &protocol.BoardResult{Summary: "done it", Artifacts: []string{"a.txt", "b.txt"}}) {
		t.Fatalf("complete: exit %d, request %+v", code, req)
	}
	if !strings.HasPrefix(out, "completed p/build claimed by agent-1") {
		t.Fatalf("complete: %q", out)
	}
	code, _, _ = runIn(e.agent, "board", "fail", "p", "build", "--reason", "tests fail")
	if req := one(t, e.fake, agentSubject(protocol.BoardOpFail)); code != cli.ExitOK || req.Reason != "tests fail" || req.Result != nil {
		t.Fatalf("fail: exit %d, request %+v", code, req)
	}
	code, _, _ = runIn(e.agent, "board", "release", "--reason", "busy", "p", "build")
	if req := one(t, e.fake, agentSubject(protocol.BoardOpRelease)); code != cli.ExitOK || req.Reason != "busy" || req.Task != "build" {
		t.Fatalf("release: exit %d, request %+v", code, req)
	}
	code, out, _ = runIn(e.agent, "board", "renew", "--json", "p", "build")
	if req := one(t, e.fake, agentSubject(protocol.BoardOpRenew)); code != cli.ExitOK || req.Task != "build" || !strings.Contains(out, `"leaseUntil"`) {
		t.Fatalf("renew: exit %d, request %+v, %q", code, req, out)
	}

	code, out, _ = runIn(e.agent, "board", "add", "p", "build", "--id", "lint", "--needs", "a, b", "--run", "--", "make", "lint", "--fix")
	req = one(t, e.fake, agentSubject(protocol.BoardOpAdd))
	want := []protocol.BoardTaskSpec{{ID: "lint", Run: []string{"make", "lint", "--fix"}, Needs: []string{"a", "b"}}}
	if code != cli.ExitOK || req.Plan != "p" || req.Task != "build" || !reflect.DeepEqual(req.Tasks, want) || out != "added p/lint ready\n" {
		t.Fatalf("add run: exit %d, request %+v, %q", code, req, out)
	}
	code, _, _ = runIn(e.agent, "board", "add", "p", "build", "--id", "doc", "--title", "Docs", "--prompt", "Write the docs.", "--timeout", "2m")
	want = []protocol.BoardTaskSpec{{ID: "doc", Title: "Docs", Prompt: "Write the docs.", Timeout: protocol.Duration(2 * time.Minute)}}
	if req := one(t, e.fake, agentSubject(protocol.BoardOpAdd)); code != cli.ExitOK || !reflect.DeepEqual(req.Tasks, want) {
		t.Fatalf("add prompt: exit %d, request %+v", code, req)
	}
	for _, args := range [][]string{
		{"board", "add", "p", "build", "--prompt", "x"},                                   // no --id
		{"board", "add", "p", "build", "--id", "x"},                                       // neither kind
		{"board", "add", "p", "build", "--id", "x", "--prompt", "y", "--run", "--", "ls"}, // both
		{"board", "add", "p", "build", "--id", "x", "--run"},                              // --run without a command
		{"board", "add", "p", "build", "--id", "x", "--", "ls"},                           // a command without --run
		{"board", "fail", "p", "build"},                                                   // no reason
		{"board", "claim", "--kind", "shell"},
		{"board", "complete", "p"},
	} {
		if code, _, _ := runIn(e.agent, args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
	if reqs := e.fake.Requests(); len(reqs) != 0 {
		t.Fatalf("usage errors reached the board: %+v", reqs)
	}

	// list and show: as the agent in its environment, as the operator when told.
	if code, _, _ := runIn(e.agent, "board", "list"); code != cli.ExitOK {
		t.Fatalf("list as the agent: exit %d", code)
	}
	one(t, e.fake, agentSubject(protocol.BoardOpList))
	opEnv := map[string]string{"FLOCK_AGENT_ID": boardtest.Agent, "FLOCK_NATS_URL": e.fake.URL}
	if code, _, errOut := runIn(opEnv, "board", "list", "--nkey", e.fake.Seeds[protocol.OperatorUser]); code != cli.ExitOK {
		t.Fatalf("list with --nkey: exit %d %s", code, errOut)
	}
	one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpList))
	if code, _, _ := runIn(e.operator, "board", "show", "--as-agent", "--nkey", e.fake.Seeds[boardtest.Agent], "p", "build"); code != cli.ExitUsage {
		t.Fatalf("--as-agent without an agent ID: exit %d", code) // FLOCK_AGENT_ID: required
	}
	if code, _, _ := runIn(e.agent, "board", "list", "--as-agent", "--operator"); code != cli.ExitUsage {
		t.Fatalf("both sides: exit %d", code)
	}
	// An agent's commands outside an agent's environment: a usage error.
	if code, _, errOut := runIn(e.operator, "board", "claim"); code != cli.ExitUsage || !strings.Contains(errOut, "FLOCK_AGENT_ID") {
		t.Fatalf("claim as the operator: exit %d, %q", code, errOut)
	}
}

// put sends a file's bytes as an artifact of a held task, named after the
// file unless --name says; get writes an artifact's bytes to stdout or -o.
func TestBoardArtifactCommands(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		switch r.Op {
		case protocol.BoardOpPut:
			return protocol.BoardReply{Artifact: &protocol.BoardArtifact{Plan: r.Body.Plan, Task: r.Body.Task, Name: r.Body.Name, Size: len(r.Body.Data), By: boardtest.Agent}}
		case protocol.BoardOpGet:
			return protocol.BoardReply{Artifact: &protocol.BoardArtifact{Name: r.Body.Name}, Data: []byte("bytes of " + r.Body.Name)}
		}
		return boardtest.Refuse(protocol.BoardErrInvalid, "unexpected op "+r.Op)
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "report.txt")
	if err := os.WriteFile(file, []byte("the report"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runIn(e.agent, "board", "put", "p", "build", file)
	req := one(t, e.fake, protocol.BoardAgentSubject(boardtest.Agent, protocol.BoardOpPut))
	if code != cli.ExitOK || req.Name != "report.txt" || string(req.Data) != "the report" || out != "put p/build/report.txt (10 bytes)\n" {
		t.Fatalf("put: exit %d %q %q, request %+v", code, out, errOut, req)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, protocol.ArtifactBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runIn(e.agent, "board", "put", "p", "build", big); code != cli.ExitUsage || !strings.Contains(errOut, "over the board's 262144-byte limit") {
		t.Fatalf("put of a file too large: exit %d %q", code, errOut)
	}
	if code, out, _ := runIn(e.operator, "board", "get", "p", "build", "report.txt"); code != cli.ExitOK || out != "bytes of report.txt" {
		t.Fatalf("get: exit %d %q", code, out)
	}
	one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpGet))
	saved := filepath.Join(dir, "saved")
	if code, _, _ := runIn(e.agent, "board", "get", "p", "build", "report.txt", "-o", saved); code != cli.ExitOK {
		t.Fatalf("get -o: exit %d", code)
	}
	if b, err := os.ReadFile(saved); err != nil || string(b) != "bytes of report.txt" {
		t.Fatalf("get -o wrote %q %v", b, err)
	}
}

// plan check checks a file as apply would, offline: no bus, no key (an
// empty environment). Exit 0 and a line for a good file; exit 1 naming
// each problem with its line (file:line: field: problem) for a bad one, or
// the parse error; exit 2 for a usage error. --json says the same on stdout.
func TestPlanCheckIsOfflineAndExitsByTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	none := map[string]string{}
	good := write("good.yaml", "tasks:\n  - id: a\n    run: [make]\n  - id: b\n    prompt: x\n    needs: [a]\n")
	if code, out, errOut := runIn(none, "plan", "check", good); code != cli.ExitOK || out != good+": plan good: 2 tasks, no problem\n" || errOut != "" {
		t.Fatalf("a good file: exit %d, %q %q", code, out, errOut)
	}
	bad := write("bad.yaml", "plan: rel\ntasks:\n  - id: a\n    prompt: x\n    needs: [b]\n  - id: b\n    prompt: y\n    needs: [a, ghost]\n    timeout: 48h\n")
	code, out, errOut := runIn(none, "plan", "check", bad)
	want := bad + ":9: tasks[1].timeout: must be between 0 (the default, 10m0s) and 24h0m0s (got 48h0m0s)\n" +
		bad + ":8: tasks[1].needs[1]: \"ghost\" is not a task of the plan\n" +
		bad + ":5: tasks[0].needs: a cycle: a -> b -> a\n" +
		bad + ": plan rel: 3 problems: apply would refuse it\n"
	if code != cli.ExitTaskFailed || out != "" || errOut != want {
		t.Fatalf("a bad file: exit %d, out %q, err:\n%s\nwant:\n%s", code, out, errOut, want)
	}
	code, out, _ = runIn(none, "plan", "check", "--json", bad)
	var got struct {
		Plan     string
		OK       bool
		Problems []struct {
			Field, Problem string
			Line           int
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != cli.ExitTaskFailed || got.OK || got.Plan != "rel" || len(got.Problems) != 3 || got.Problems[2].Line != 5 {
		t.Fatalf("--json: exit %d, %q %v", code, out, err)
	}
	unparsed := write("unparsed.yaml", "tasks:\n  - id: a\n    prompt: x\n    neds: [b]\n")
	if code, _, errOut := runIn(none, "plan", "check", unparsed); code != cli.ExitTaskFailed || !strings.Contains(errOut, `line 4: unknown key "neds"`) {
		t.Fatalf("an unknown key: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runIn(none, "plan", "check", filepath.Join(dir, "missing.yaml")); code != cli.ExitTaskFailed || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("a missing file: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{{"plan", "check"}, {"plan", "check", good, bad}, {"plan", "check", "--frob", good}} {
		if code, _, _ := runIn(none, args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, cli.ExitUsage)
		}
	}
}

// plan apply --dry-run asks the board's dry run (its own op: an older board
// refuses it rather than apply) and prints what apply would do as apply
// prints its changes; a dry run the board would refuse prints the changes
// and the refusal, and exits 1.
func TestPlanApplyDryRun(t *testing.T) {
	t.Parallel()
	e := startBoard(t)
	file := filepath.Join(t.TempDir(), "rel.yaml")
	if err := os.WriteFile(file, []byte("tasks:\n  - id: build\n    run: [make]\n  - id: deploy\n    prompt: Deploy.\n    needs: [build]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	changes := []protocol.BoardChange{
		{Task: "build", Change: protocol.BoardUnchanged, Status: protocol.BoardDone},
		{Task: "deploy", Change: protocol.BoardCreated, Status: protocol.BoardReady},
	}
	e.fake.Handle(func(boardtest.Request) protocol.BoardReply { return protocol.BoardReply{Changes: changes} })
	code, out, errOut := runIn(e.operator, "plan", "apply", file, "--dry-run")
	if code != cli.ExitOK || out != "unchanged rel/build (done)\ncreated   rel/deploy (ready)\nplan rel (dry run: nothing written): 2 tasks: 1 created, 1 unchanged\n" {
		t.Fatalf("dry run: exit %d, %q %q", code, out, errOut)
	}
	if req := one(t, e.fake, protocol.BoardOperatorSubject(protocol.BoardOpDryRun)); req.Plan != "rel" || len(req.Tasks) != 2 {
		t.Fatalf("sent %+v", req)
	}

	refusal := "the plan is not applied: 1 of its tasks are on the board but were not created by the operator"
	changes[1] = protocol.BoardChange{Task: "deploy", Change: protocol.BoardRefused, Status: protocol.BoardDone, Why: "was created by agent-1, not the operator: apply does not adopt it"}
	e.fake.Handle(func(boardtest.Request) protocol.BoardReply {
		return protocol.BoardReply{Changes: changes, Code: protocol.BoardErrForbidden, Error: refusal}
	})
	code, out, errOut = runIn(e.operator, "plan", "apply", "--dry-run", file)
	if code != cli.ExitTaskFailed || !strings.Contains(out, "refused   rel/deploy (done): was created by agent-1, not the operator") ||
		!strings.Contains(out, "2 tasks: 1 unchanged, 1 refused") || !strings.Contains(errOut, refusal+" (forbidden)") {
		t.Fatalf("a refused dry run: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = runIn(e.operator, "plan", "apply", "--dry-run", "--json", file)
	var got struct {
		DryRun  bool
		Changes []protocol.BoardChange
		Refused struct{ Code, Error string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != cli.ExitTaskFailed || !got.DryRun || got.Refused.Code != protocol.BoardErrForbidden || len(got.Changes) != 2 {
		t.Fatalf("--json: exit %d, %q %v", code, out, err)
	}
	// A refusal without changes (a bad plan): the refusal alone.
	e.fake.Handle(func(boardtest.Request) protocol.BoardReply {
		return boardtest.Refuse(protocol.BoardErrInvalid, "a cycle")
	})
	if code, out, errOut := runIn(e.operator, "plan", "apply", "--dry-run", file); code != cli.ExitTaskFailed || out != "" || !strings.Contains(errOut, "a cycle (invalid)") {
		t.Fatalf("a bad plan's dry run: exit %d, %q %q", code, out, errOut)
	}
	// An older board, which knows no dry run: refused, never applied.
	e.fake.Handle(func(r boardtest.Request) protocol.BoardReply {
		return boardtest.Refuse(protocol.BoardErrInvalid, `unknown op "`+r.Op+`"`)
	})
	if code, _, errOut := runIn(e.operator, "plan", "apply", "--dry-run", file); code != cli.ExitTaskFailed || !strings.Contains(errOut, `unknown op "apply-dry-run"`) {
		t.Fatalf("an older board: exit %d, %q", code, errOut)
	}
}
