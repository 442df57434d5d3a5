package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// The board on the e2e flock: a plan the agents run in their containers,
// and a hostile agent at the board with its own key.

const (
	// boardLabelledAgent has the e2e flock's only board label
	// (flock:agents[i].labels): a task with it is for that agent alone.
	boardLabelledAgent = "agent-2"
	boardLabel         = "e2e-secret"
	// boardAddQuota is flock:board.addQuota in the e2e flock: small, so
	// that a flood of adds meets it.
	boardAddQuota = 4
)

// boardPlanID is a plan ID of the test's own (plan IDs name no directory
// but take no dot).
func boardPlanID(tag string) string {
	return fmt.Sprintf("e2e-%s-%s", tag, strconv.FormatInt(time.Now().UnixNano(), 36))
}

// boardOperator is an operator board client on a connection of its own.
func boardOperator(t *testing.T) *board.Client {
	t.Helper()
	nc, _ := jsClient(t)
	return board.NewOperatorClient(nc)
}

func boardCtx(t *testing.T) context.Context {
	return testContext(t, 15*time.Second)
}

// applyBoard applies p and wants every task created.
func applyBoard(t *testing.T, cl *board.Client, p protocol.BoardPlan) {
	t.Helper()
	changes, err := cl.Apply(boardCtx(t), p)
	if err != nil {
		t.Fatalf("apply %s: %v", p.Plan, err)
	}
	for _, c := range changes {
		if c.Change != protocol.BoardCreated {
			t.Fatalf("apply %s: %+v, want every task created", p.Plan, changes)
		}
	}
	// Whatever the test comes to, no task of it is left for the flock.
	t.Cleanup(func() { cancelPlan(t, cl, p.Plan) })
}

// cancelPlan cancels every task of plan that is not over, then removes the
// plan from the board.
func cancelPlan(t *testing.T, cl *board.Client, plan string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := cl.List(ctx, plan)
	if err != nil {
		t.Logf("cleanup: list %s: %v", plan, err)
		return
	}
	for _, task := range ts {
		switch task.Status {
		case protocol.BoardDone, protocol.BoardFailed, protocol.BoardCancelled:
			continue
		}
		if _, err := cl.Cancel(ctx, plan, task.ID, "the test is over"); err != nil {
			t.Logf("cleanup: cancel %s: %v", task.Key(), err)
		}
	}
	// And off the board, with its artifacts: a flock probed again (a
	// deployed one keeps its store across deploys) starts with every
	// agent's artifact quota free.
	if _, err := cl.Remove(ctx, plan); err != nil {
		t.Logf("cleanup: remove %s: %v", plan, err)
	}
}

// waitPlanOver waits until no task of plan is blocked, ready or claimed
// and returns its tasks by ID.
func waitPlanOver(t *testing.T, cl *board.Client, plan string, d time.Duration) map[string]protocol.BoardTask {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ts, err := cl.List(ctx, plan)
		cancel()
		if err == nil {
			over := true
			byID := map[string]protocol.BoardTask{}
			for _, task := range ts {
				byID[task.ID] = task
				switch task.Status {
				case protocol.BoardBlocked, protocol.BoardReady, protocol.BoardClaimed:
					over = false
				}
			}
			if over {
				return byID
			}
			if time.Now().After(deadline) {
				var st []string
				for _, task := range ts {
					st = append(st, task.ID+"="+task.Status+" "+task.Holder)
				}
				t.Fatalf("plan %s not over after %s: %v", plan, d, st)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("plan %s: list: %v", plan, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The operator applies a plan of four run tasks (a; b and c need a; d
// needs b and c), each a command of the agent binary's own tools, b for
// the agent with its label, c for one agent by name: the idle agents claim
// them in their containers and run them, and the plan ends done. Each task's summary is what its command printed; b's working
// directory, which it printed, is its task directory under the holder's
// own directory, owned by the holder, and no other agent's directory has
// the task; d's context (context.json in its task directory, which it
// printed) holds b's and c's results.
func TestBoardPlanRunsOnTheFlock(t *testing.T) {
	f := need(t)
	cl := boardOperator(t)
	plan := boardPlanID("dag")
	tool := func(args ...string) []string { return append([]string{"/flock-agent", "tool"}, args...) }
	timeout := protocol.Duration(time.Minute)
	// b is for agent-2 (by its label; against a deployed flock, by name), c
	// for the last agent: the first idle agent to ask would take them all.
	b := protocol.BoardTaskSpec{ID: "b", Run: tool("pwd"), Needs: []string{"a"}, Timeout: timeout}
	if f.replayed != nil {
		b.Labels = []string{boardLabel}
	} else {
		b.Assignee = boardLabelledAgent
	}
	last := f.agents[len(f.agents)-1]
	start := time.Now()
	applyBoard(t, cl, protocol.BoardPlan{Plan: plan, Tasks: []protocol.BoardTaskSpec{
		{ID: "a", Run: tool("echo", "a ran in", plan), Timeout: timeout},
		b,
		{ID: "c", Run: tool("echo", "c ran in", plan), Needs: []string{"a"}, Assignee: last, Timeout: timeout},
		{ID: "d", Run: tool("read", "context.json"), Needs: []string{"b", "c"}, Timeout: timeout},
	}})
	tasks := waitPlanOver(t, cl, plan, 2*time.Minute)
	took := time.Since(start)

	dirs := map[string]string{} // task ID -> its task directory on the host
	for _, id := range []string{"a", "b", "c", "d"} {
		task, ok := tasks[id]
		if !ok {
			t.Fatalf("task %s is not on the board: %+v", id, tasks)
		}
		if task.Status != protocol.BoardDone || task.Result == nil || task.Result.ExitCode == nil || *task.Result.ExitCode != 0 {
			t.Fatalf("task %s: %s (%s), result %+v: want done with exit code 0", id, task.Status, task.Reason, task.Result)
		}
		if !slices.Contains(f.agents, task.Holder) {
			t.Fatalf("task %s was held by %q, not an agent of the flock", id, task.Holder)
		}
		// Its directory, on the host: under its holder's own directory,
		// owned by the holder, and in no other agent's.
		name := fmt.Sprintf("board-%s-%d", task.Key(), task.Attempts)
		found, err := filepath.Glob(filepath.Join(f.sharedRoot, "agents", "*", "tasks", "board-"+task.Key()+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(f.sharedRoot, "agents", task.Holder, "tasks", name)
		if len(found) != 1 || found[0] != want {
			t.Fatalf("task %s (held by %s, attempt %d): task directories %v, want only %s", id, task.Holder, task.Attempts, found, want)
		}
		fi, err := os.Stat(want)
		if err != nil {
			t.Fatal(err)
		}
		if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != f.uids[task.Holder] {
			t.Errorf("task %s's directory %s is owned by uid %d, not its holder %s's %d", id, want, uid, task.Holder, f.uids[task.Holder])
		}
		dirs[id] = want
		t.Logf("%s: done by %s (attempt %d) in %s", id, task.Holder, task.Attempts, want)
	}
	if tasks["b"].Holder != boardLabelledAgent || tasks["c"].Holder != last {
		t.Errorf("b held by %s, c by %s: want %s (its label) and %s (its assignee)", tasks["b"].Holder, tasks["c"].Holder, boardLabelledAgent, last)
	}
	summary := func(id string) string { return strings.TrimSpace(tasks[id].Result.Summary) }
	for _, id := range []string{"a", "c"} {
		if want := id + " ran in " + plan; summary(id) != want {
			t.Errorf("%s's summary %q, want what it printed: %q", id, summary(id), want)
		}
	}
	// b printed its working directory: its task directory, as its
	// container sees the shared directory.
	if want := "/shared/" + strings.TrimPrefix(dirs["b"], f.sharedRoot+"/"); summary("b") != want {
		t.Errorf("b's summary %q, want its task directory %q", summary("b"), want)
	}
	// d printed its context: b's and c's results.
	file := readFile(t, filepath.Join(dirs["d"], "context.json"))
	printed := strings.TrimSpace(string(file))
	if len(printed) > protocol.MaxBoardSummary-utf8.UTFMax { // the summary is its end
		printed = printed[len(printed)-len(summary("d")):]
	}
	if summary("d") != printed {
		t.Errorf("d's summary %q is not its context.json %q", summary("d"), file)
	}
	var needs []protocol.BoardTask
	if err := json.Unmarshal(file, &needs); err != nil {
		t.Fatalf("d's context.json: %v: %q", err, file)
	}
	got := map[string]string{}
	for _, n := range needs {
		if n.Result != nil {
			got[n.ID] = strings.TrimSpace(n.Result.Summary)
		}
		if len(n.Run) > 0 {
			t.Errorf("d's context gives %s's command %v: a context carries results only", n.ID, n.Run)
		}
	}
	if len(needs) != 2 || got["b"] != summary("b") || got["c"] != summary("c") {
		t.Errorf("d's context %v, want b's %q and c's %q", got, summary("b"), summary("c"))
	}
	t.Logf("plan %s: 4 run tasks done in %s", plan, took.Round(time.Millisecond))
}

// agent-1, with its own key from its container, at the board: plan
// "other" has a task labelled for agent-2 alone and one agent-2 holds,
// plan "mine" two prompt tasks assigned to agent-1 (prompt tasks: agent-1's
// runtime claims run tasks only). Each refusal is asserted by its code:
// the board's (forbidden, nothing, limit; not-found for every op on a task
// it may not see, as for one that does not exist), or the bus's (a
// permissions violation, no answer).
func TestHostileBoard(t *testing.T) {
	skipUnderGVisor(t, limitOutsideTheSandbox)
	f, a1, a2 := needTwo(t)
	cl := boardOperator(t)
	other, mine := boardPlanID("other"), boardPlanID("mine")
	applyBoard(t, cl, protocol.BoardPlan{Plan: other, Tasks: []protocol.BoardTaskSpec{
		{ID: "secret", Prompt: "for the labelled agent only", Labels: []string{boardLabel}},
		{ID: "held", Prompt: "agent-2's", Assignee: a2},
	}})
	applyBoard(t, cl, protocol.BoardPlan{Plan: mine, Tasks: []protocol.BoardTaskSpec{
		{ID: "m1", Prompt: "agent-1's first", Assignee: a1},
		{ID: "m2", Prompt: "agent-1's second", Assignee: a1},
	}})
	// agent-2 claims its task, from its container with its key.
	out := mustSucceed(t, a2, "board-claim", "nats://bus:4222", protocol.ContainerCredsFile, other, "held")
	var claimed protocol.BoardReply
	if err := json.Unmarshal([]byte(lastLine(out)), &claimed); err != nil || claimed.Task == nil || claimed.Task.Holder != a2 || claimed.Task.Status != protocol.BoardClaimed {
		t.Fatalf("agent-2's claim: %q %v", out, err)
	}

	mustSucceed(t, a2, "board-put", "nats://bus:4222", protocol.ContainerCredsFile, other, "held", "victim.txt", "agent-2's work")

	storeBytes := func() int {
		_, js := jsClient(t)
		st, err := js.Stream(boardCtx(t), protocol.ArtifactStream)
		if err != nil {
			t.Fatal(err)
		}
		return int(st.CachedInfo().State.Bytes)
	}
	storeBefore := storeBytes()
	start := time.Now()
	r := <-probeAsync(a1, 3*time.Minute, "board-hostile", "nats://bus:4222", protocol.ContainerCredsFile, a2, other, mine)
	if err := r.ended(); err != nil {
		t.Fatalf("the hostile probe: %v: %s", err, r.all())
	}
	var outcome map[string]string
	if err := json.Unmarshal([]byte(lastLine(r.out)), &outcome); err != nil {
		t.Fatalf("%q: %v", r.out, err)
	}
	t.Logf("agent-1 at the board, %s: %v", time.Since(start).Round(time.Millisecond), outcome)

	quota := protocol.DefaultBoardAddQuota
	if f.replayed != nil {
		quota = boardAddQuota
	}
	before, _ := strconv.Atoi(outcome["flood added before"])
	fills, empties := artifactFlood(a1, mine, len(f.agents))
	want := map[string]string{
		// Controls: what it may do, it can.
		"show own task":    "ok",
		"claim own task":   "ok",
		"request own list": "answered",
		// The board's refusals: every op on a task of plan other, which
		// it may not see, answers as on a task that does not exist.
		"claim in other plan":           protocol.BoardErrNothing,
		"claim labelled task":           protocol.BoardErrNotFound,
		"claim held task":               protocol.BoardErrNotFound,
		"renew held task":               protocol.BoardErrNotFound,
		"complete held task":            protocol.BoardErrNotFound,
		"fail held task":                protocol.BoardErrNotFound,
		"release held task":             protocol.BoardErrNotFound,
		"show labelled task":            protocol.BoardErrNotFound,
		"show held task":                protocol.BoardErrNotFound,
		"list other plan":               "0 tasks []",
		"claim a second task":           protocol.BoardErrLimit,
		"claim any task past the limit": protocol.BoardErrLimit,
		"add run task for victim":       protocol.BoardErrForbidden,
		"add run task for anyone":       protocol.BoardErrForbidden,
		"add under held task":           protocol.BoardErrNotFound,
		"flood added":                   strconv.Itoa(max(quota-before, 0)),
		"flood refused":                 "limit limit limit",
		"put under held task":           protocol.BoardErrNotFound, // it may not see the task at all
		"get victim's artifact":         protocol.BoardErrNotFound,
		"put own artifact":              "ok",
		// Its share of the store, each artifact charged what it costs (its
		// own notes.txt first), then the count of artifacts it may keep.
		"artifact flood":       fmt.Sprintf("%d put, then %s", fills, protocol.BoardErrLimit),
		"empty artifact flood": fmt.Sprintf("%d put, then %s", empties, protocol.BoardErrLimit),
		// The bus's refusals.
		"request as victim":                "denied",
		"publish as victim":                "denied",
		"request as operator":              "denied",
		"write bucket":                     "denied",
		"write bucket with ack":            "denied",
		"direct get":                       "denied",
		"direct get by body":               "denied",
		"stream info":                      "denied",
		"stream msg get":                   "denied",
		"consumer create":                  "denied",
		"named consumer create":            "denied",
		"stream purge":                     "denied",
		"artifact direct get":              "denied",
		"artifact stream info":             "denied",
		"artifact chunk write":             "denied",
		"subscribe artifacts":              "denied",
		"subscribe events":                 "denied",
		"subscribe other plan events":      "denied",
		"subscribe bucket":                 "denied",
		"subscribe agents' requests":       "denied",
		"serve in the board's queue group": "denied",
		"subscribe operator requests":      "denied",
		// Nor does the board answer where the reply subject is not its inbox.
		"answer into its inbox as the operator": "unanswered",
	}
	for k, v := range want {
		if outcome[k] != v {
			t.Errorf("agent-1: %s: %q, want %q", k, outcome[k], v)
		}
	}
	for k := range outcome {
		if _, ok := want[k]; !ok && k != "flood added before" {
			t.Errorf("agent-1: %s: %q, which the test does not check", k, outcome[k])
		}
	}

	// Its floods took no more of the store than its share, as charged, and
	// agent-2 still puts an artifact at once.
	if grew, share := storeBytes()-storeBefore, protocol.ArtifactQuota(len(f.agents)); grew > share {
		t.Errorf("agent-1's artifacts grew the store %d bytes, over its share of %d", grew, share)
	}
	putStart := time.Now()
	mustSucceed(t, a2, "board-put", "nats://bus:4222", protocol.ContainerCredsFile, other, "held", "after.txt", "agent-2's, after the flood")
	if took := time.Since(putStart); took > 5*time.Second {
		t.Errorf("agent-2's put after agent-1's artifact floods took %s", took)
	}

	// Nothing it tried changed agent-2's task, or gave anyone a command.
	ctx := boardCtx(t)
	if got, err := cl.Show(ctx, other, "held"); err != nil || got.Status != protocol.BoardClaimed || got.Holder != a2 || got.Result != nil {
		t.Errorf("agent-2's task after the attack: %+v %v", got, err)
	}
	if got, err := cl.Show(ctx, other, "secret"); err != nil || got.Status != protocol.BoardReady {
		t.Errorf("the labelled task after the attack: %+v %v", got, err)
	}
	if got, err := cl.Show(ctx, mine, "m2"); err != nil || got.Status != protocol.BoardReady || got.Prompt == "forged" {
		t.Errorf("agent-1's second task after the attack: %+v %v", got, err)
	}
	for _, id := range []string{"evil-run", "evil-any", "evil-under"} {
		for _, p := range []string{other, mine} {
			if _, err := cl.Show(ctx, p, protocol.BoardAgentTaskID(a1, id)); boardErrCode(err) != protocol.BoardErrNotFound {
				t.Errorf("%s.%s/%s: %v, want not-found: the add was refused", p, a1, id, err)
			}
			if _, err := cl.Show(ctx, p, id); boardErrCode(err) != protocol.BoardErrNotFound {
				t.Errorf("%s.%s: %v, want not-found: the add was refused", p, id, err)
			}
		}
	}
	ts, err := cl.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range ts {
		if task.CreatedBy == a1 {
			n++
		}
	}
	if n != max(quota, before) {
		t.Errorf("agent-1 has added %d tasks; its quota is %d", n, quota)
	}
}

// artifactFlood is what agent a1's artifact floods under plan/m1 come to
// on a board of n agents: how many artifacts of 256 KiB fit its share of
// the store after its own notes.txt, then how many empty ones, each charged
// what it costs the store, within its count.
func artifactFlood(a1, plan string, n int) (fills, empties int) {
	left := protocol.ArtifactQuota(n) - board.ArtifactCost(protocol.ArtifactObject(plan, "m1", "notes.txt"), a1, 4)
	kept := 1
	for i := 0; i < protocol.ArtifactQuotaBytes/protocol.ArtifactBytes+2; i++ {
		c := board.ArtifactCost(protocol.ArtifactObject(plan, "m1", "fill-"+strconv.Itoa(i)), a1, protocol.ArtifactBytes)
		if c > left {
			break
		}
		left, kept, fills = left-c, kept+1, fills+1
	}
	for i := 0; kept < protocol.ArtifactQuotaObjects; i++ {
		c := board.ArtifactCost(protocol.ArtifactObject(plan, "m1", "empty-"+strconv.Itoa(i)), a1, 0)
		if c > left {
			break
		}
		left, kept, empties = left-c, kept+1, empties+1
	}
	return fills, empties
}

func boardErrCode(err error) string {
	var be *protocol.BoardError
	if err == nil {
		return ""
	}
	if errors.As(err, &be) {
		return be.Code
	}
	return err.Error()
}

// agent-1, holding a task of an applied plan, squats from its container
// with its own key: it adds a subtask under the ID "deploy" that the
// operator's next version of the plan will add (and one in agent-2's
// namespace), and completes it with a forged result and artifact ("deployed
// v1.2.3 to prod"). The board puts its subtask in agent-1's namespace
// (agent-1/deploy) and refuses agent-2's; the operator's dry run and apply
// of the next version create the plan's own deploy, which agent-2's runtime
// runs; agent-2, claiming report (which needs deploy), is handed the
// operator's deploy's result and artifact, never agent-1's. And agent-1's
// every op on report (agent-2's, which it may not see) answers as on a task
// that does not exist, byte for byte but the name.
func TestHostileBoardSquat(t *testing.T) {
	_, a1, a2 := needTwo(t)
	cl := boardOperator(t)
	plan := boardPlanID("squat")
	applyBoard(t, cl, protocol.BoardPlan{Plan: plan, Tasks: []protocol.BoardTaskSpec{
		{ID: "work", Prompt: "agent-1's part", Assignee: a1},
		{ID: "report", Prompt: "report on the release", Assignee: a2, Needs: []string{"work"}},
	}})
	r := <-probeAsync(a1, 2*time.Minute, "board-squat", "nats://bus:4222", protocol.ContainerCredsFile, plan, "work", "deploy", a2, "report")
	if err := r.ended(); err != nil {
		t.Fatalf("the squatting probe: %v: %s", err, r.all())
	}
	var outcome map[string]string
	if err := json.Unmarshal([]byte(lastLine(r.out)), &outcome); err != nil {
		t.Fatalf("%q: %v", r.out, err)
	}
	t.Logf("agent-1 squatting: %v", outcome)
	want := map[string]string{
		"claim under":               "ok",
		"add squat":                 "ok",
		"added":                     protocol.BoardAgentTaskID(a1, "deploy"), // its own namespace, not the plan's deploy
		"add in victim's namespace": protocol.BoardErrForbidden,
		"complete under":            "ok",
		"claim squat":               "ok",
		"put forged artifact":       "ok",
		"complete squat":            "ok",
	}
	for _, op := range []string{"add needing", "show", "claim", "claim a run", "renew", "complete", "fail", "release", "add under", "put", "get"} {
		want["oracle "+op] = "same"
	}
	for k, v := range want {
		if outcome[k] != v {
			t.Errorf("agent-1: %s: %q, want %q", k, outcome[k], v)
		}
	}
	for k := range outcome {
		if _, ok := want[k]; !ok {
			t.Errorf("agent-1: %s: %q, which the test does not check", k, outcome[k])
		}
	}

	// The operator's next version adds deploy, a run task of agent-2's
	// that leaves an artifact, and report needs it. Its dry run says what
	// the apply does, and writes nothing.
	ctx := testContext(t, time.Minute)
	next := protocol.BoardPlan{Plan: plan, Tasks: []protocol.BoardTaskSpec{
		{ID: "work", Prompt: "agent-1's part", Assignee: a1},
		{ID: "deploy", Run: []string{"/flock-agent", "tool", "write", "artifacts/release.txt", "released by the operator's deploy"}, Assignee: a2, Timeout: protocol.Duration(time.Minute)},
		{ID: "report", Prompt: "report on the release", Assignee: a2, Needs: []string{"work", "deploy"}},
	}}
	wantChanges := []protocol.BoardChange{
		{Task: "work", Change: protocol.BoardUnchanged, Status: protocol.BoardDone},
		{Task: "deploy", Change: protocol.BoardCreated, Status: protocol.BoardReady},
		{Task: "report", Change: protocol.BoardUpdated, Status: protocol.BoardBlocked},
	}
	dry, err := cl.DryRun(ctx, next)
	if err != nil || !slices.Equal(dry, wantChanges) {
		t.Errorf("the dry run: %+v %v, want %+v", dry, err, wantChanges)
	}
	if _, err := cl.Show(ctx, plan, "deploy"); boardErrCode(err) != protocol.BoardErrNotFound {
		t.Errorf("deploy after the dry run: %v, want not-found (nothing written)", err)
	}
	applied, err := cl.Apply(ctx, next)
	if err != nil || !slices.Equal(applied, wantChanges) {
		t.Errorf("the apply: %+v %v, want %+v", applied, err, wantChanges)
	}

	// agent-2's runtime runs the operator's deploy; then report is ready.
	deadline := time.Now().Add(2 * time.Minute)
	var report *protocol.BoardTask
	for report == nil || report.Status != protocol.BoardReady {
		if time.Now().After(deadline) {
			t.Fatalf("report not ready: %+v", report)
		}
		time.Sleep(500 * time.Millisecond)
		if report, err = cl.Show(boardCtx(t), plan, "report"); err != nil {
			t.Fatal(err)
		}
	}
	deploy, err := cl.Show(ctx, plan, "deploy")
	if err != nil || deploy.CreatedBy != protocol.OperatorUser || deploy.Holder != a2 || deploy.Status != protocol.BoardDone {
		t.Errorf("the plan's deploy: %+v %v, want the operator's, done by %s", deploy, err, a2)
	}

	// agent-2 claims report: its context is the operator's deploy's.
	out := mustSucceed(t, a2, "board-claim", "nats://bus:4222", protocol.ContainerCredsFile, plan, "report")
	var claimed protocol.BoardReply
	if err := json.Unmarshal([]byte(lastLine(out)), &claimed); err != nil || claimed.Task == nil {
		t.Fatalf("agent-2's claim: %q %v", out, err)
	}
	got := map[string]protocol.BoardTask{}
	for _, d := range claimed.Context {
		got[d.ID] = d
		if d.Result != nil && strings.Contains(d.Result.Summary, "v1.2.3") {
			t.Errorf("agent-2 was handed agent-1's forged result as %s's: %+v", d.ID, d)
		}
	}
	if d, ok := got["deploy"]; !ok || d.CreatedBy != protocol.OperatorUser || d.Holder != a2 || d.Result == nil || !slices.Equal(d.Result.Artifacts, []string{"release.txt"}) {
		t.Errorf("report's context for deploy: %+v (of %+v)", d, claimed.Context)
	}
	out = mustSucceed(t, a2, "board-get", "nats://bus:4222", protocol.ContainerCredsFile, plan, "deploy", "release.txt")
	var art struct {
		Artifact protocol.BoardArtifact
		Text     string
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &art); err != nil || art.Text != "released by the operator's deploy" || art.Artifact.By != a2 {
		t.Errorf("deploy's release.txt as agent-2 gets it: %q %v", out, err)
	}
	// agent-1's forgery is its own task, apart.
	if own, err := cl.Show(ctx, plan, protocol.BoardAgentTaskID(a1, "deploy")); err != nil || own.CreatedBy != a1 || own.Result == nil || own.Result.Summary != "deployed v1.2.3 to prod" {
		t.Errorf("agent-1's own subtask: %+v %v", own, err)
	}
}
