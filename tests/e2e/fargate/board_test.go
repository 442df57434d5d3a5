package fargate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

// The flock's services on the replay: their own service, the board they
// serve, driven as an aws user drives it (the operator's task definition
// run with `plan apply`, `plan wait`, `board list`).

// servicesTask is the services' current task and its container.
func servicesTask(t *testing.T) (*fargate.Task, string) {
	t.Helper()
	cur, hist, ok := cluster.Service(flockName + "-" + awsflock.ServicesKey)
	if !ok || cur == nil || cur.State != fargate.StateRunning {
		t.Fatalf("the services have no running task: %+v (%d tasks)", cur, len(hist))
	}
	return cur, cur.Container(awsflock.RoleServices)
}

// The services' task runs as the task definition says: /flock-services,
// as their own UID (no agent's, not the bus's or the operator's), every
// process of it; a read-only root and no capabilities; healthy by their
// own check, which passes inside the container as their user; and it was
// created after the bus's last node was steady.
func TestFargateServicesTask(t *testing.T) {
	need(t)
	ctx := context.Background()
	task, c := servicesTask(t)
	if task.Health != fargate.HealthHealthy {
		t.Errorf("the services' task is %s, want HEALTHY", task.Health)
	}
	def := task.Def.Containers[0]
	uid, _, ok := strings.Cut(def.User, ":")
	if !ok || def.User != uid+":"+uid {
		t.Fatalf("the services' user %q, want UID:UID", def.User)
	}
	others := map[string]string{}
	for _, td := range cluster.Model().TaskDefs {
		if td.ARN != task.Def.ARN {
			others[td.Containers[0].User] = td.Family
		}
	}
	if fam, dup := others[def.User]; dup || uid == "0" {
		t.Errorf("the services run as %s, like %s", def.User, fam)
	}
	doc, err := engine.Inspect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := doc["Config"].(map[string]any)
	host, _ := doc["HostConfig"].(map[string]any)
	state, _ := doc["State"].(map[string]any)
	if cfg["User"] != def.User || host["ReadonlyRootfs"] != true || fmt.Sprint(host["CapDrop"]) != "[ALL]" || host["Init"] != true {
		t.Errorf("the services' container: user %v, read-only root %v, cap drop %v, init %v; want %s, true, [ALL], true",
			cfg["User"], host["ReadonlyRootfs"], host["CapDrop"], host["Init"], def.User)
	}
	if ep := fmt.Sprint(cfg["Entrypoint"]); ep != "[/flock-services]" {
		t.Errorf("the services' container runs %s, want /flock-services", ep)
	}
	// Every process of the task (the init and flock-services under it) as the UID.
	pid := int(state["Pid"].(float64))
	procs := []int{pid}
	if kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(kids)) {
			n, _ := strconv.Atoi(f)
			procs = append(procs, n)
		}
	}
	if len(procs) < 2 {
		t.Errorf("the services' init (pid %d) has no child: %v", pid, procs)
	}
	// The process limit the task definition gives them (Fargate has no pids
	// cgroup: the nproc ulimit bounds their UID).
	var nproc int64
	for _, u := range def.Ulimits {
		if u.Name == "nproc" {
			nproc = u.HardLimit
		}
	}
	if lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); err != nil || nproc == 0 ||
		!strings.Contains(strings.Join(strings.Fields(string(lim)), " "), fmt.Sprintf("Max processes %d %d processes", nproc, nproc)) {
		t.Errorf("the services' process limit: want nproc %d from the task definition, got %v:\n%s", nproc, err, lim)
	}
	for _, p := range procs {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" && (f[1] != uid || f[2] != uid || f[3] != uid) {
				t.Errorf("process %d of the services runs as %q, want %s", p, line, uid)
			}
		}
	}
	if h, _ := state["Health"].(map[string]any); h["Status"] != "healthy" {
		t.Errorf("the engine's health of the services' container: %v", h["Status"])
	}
	res, err := engine.Exec(ctx, c, []string{"/flock-services", "health"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "healthy") {
		t.Errorf("/flock-services health in the container: %+v %v", res, err)
	}
	_, hist, _ := cluster.Service(flockName + "-bus-3")
	if len(hist) > 0 && task.Started.Before(hist[0].Running) {
		t.Errorf("the services started at %s, before the bus's last node was steady (RUNNING at %s)", task.Started.Format(time.TimeOnly), hist[0].Running.Format(time.TimeOnly))
	}
	t.Logf("services: %s as %s, healthy %s after it was asked for", task.Def.Family, def.User, task.Healthy.Sub(task.Started).Round(time.Millisecond))
}

// The board works on the replay: the operator applies a plan of three run
// tasks (greet and where; report needs both) from a file in common, the
// agents claim them in their tasks and run them, and the plan ends done.
// greet's summary is what it printed; where ran in its holder's own
// directory (on EFS, through the holder's access point, owned by its UID);
// report read its dependencies' summaries from its context.
func TestFargateBoardPlanRuns(t *testing.T) {
	need(t)
	plan := "fgt-hello-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	common, uid, err := commonDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(common, "plans")
	file := filepath.Join(dir, plan+".yaml")
	yaml := fmt.Sprintf(`plan: %s
tasks:
  - id: greet
    run: [/flock-agent, tool, echo, hello from the board on Fargate]
    timeout: 1m
  - id: where
    run: [/flock-agent, tool, pwd]
    timeout: 1m
  - id: report
    needs: [greet, where]
    run: [/flock-agent, tool, read, context.json]
    timeout: 1m
`, plan)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, file} {
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	out := runOperator(t, "plan", "apply", "--json", protocol.ContainerCommonDir()+"/plans/"+plan+".yaml")
	var applied struct {
		Plan   string
		Counts map[string]int
	}
	if err := json.Unmarshal([]byte(lastLine(out)), &applied); err != nil || applied.Plan != plan || applied.Counts[protocol.BoardCreated] != 3 {
		t.Fatalf("plan apply: %+v %v, want 3 tasks created:\n%s", applied, err, out)
	}
	runOperator(t, "plan", "wait", "--timeout", "2m", plan)
	took := time.Since(start)
	out = runOperator(t, "board", "list", "--json", "--plan", plan)
	tasks := map[string]protocol.BoardTask{}
	for _, line := range strings.Split(out, "\n") {
		var bt protocol.BoardTask
		if json.Unmarshal([]byte(line), &bt) == nil && bt.Plan == plan {
			tasks[bt.ID] = bt
		}
	}
	ids := []string{"greet", "where", "report"}
	holders := map[string]bool{}
	for _, id := range ids {
		bt, ok := tasks[id]
		if !ok {
			t.Fatalf("task %s is not on the board:\n%s", id, out)
		}
		if bt.Status != protocol.BoardDone || bt.Result == nil || bt.Result.ExitCode == nil || *bt.Result.ExitCode != 0 {
			t.Fatalf("task %s: %s (%s), result %+v: want done with exit code 0", id, bt.Status, bt.Reason, bt.Result)
		}
		if !slices.Contains([]string{"agent-1", "agent-2", "agent-3"}, bt.Holder) {
			t.Fatalf("task %s was held by %q, not an agent of the flock", id, bt.Holder)
		}
		holders[bt.Holder] = true
		sum := strings.Join(strings.Fields(bt.Result.Summary), " ")
		if len(sum) > 100 {
			sum = sum[:100] + "…"
		}
		t.Logf("%s: done by %s (attempt %d): %s", id, bt.Holder, bt.Attempts, sum)
	}
	summary := func(id string) string { return strings.TrimSpace(tasks[id].Result.Summary) }
	if summary("greet") != "hello from the board on Fargate" {
		t.Errorf("greet's summary %q, want what it printed", summary("greet"))
	}
	// where ran in its holder's own directory: on the replay's EFS, under
	// the holder's access point, owned by the holder's UID.
	where := tasks["where"]
	name := fmt.Sprintf("board-%s-%d", where.Key(), where.Attempts)
	if want := protocol.ContainerAgentDir(where.Holder) + "/tasks/" + name; summary("where") != want {
		t.Errorf("where ran in %q, want its holder's own task directory %s", summary("where"), want)
	}
	var ap *fargate.AccessPoint
	for _, a := range cluster.Model().AccessPoints {
		if a.Path == awsflock.EFSAgentDir(where.Holder) {
			ap = &a
		}
	}
	if ap == nil {
		t.Fatalf("no access point for %s's directory", where.Holder)
	}
	onEFS := filepath.Join(work, "efs", ap.FileSystemID, ap.Path, "tasks", name)
	if fi, err := os.Stat(onEFS); err != nil {
		t.Errorf("where's task directory on EFS: %v", err)
	} else if owner := int(fi.Sys().(*syscall.Stat_t).Uid); owner != ap.UID {
		t.Errorf("where's task directory %s is owned by %d, not its holder %s's %d", onEFS, owner, where.Holder, ap.UID)
	}
	for _, id := range []string{"greet", "where"} {
		if !strings.Contains(summary("report"), summary(id)) {
			t.Errorf("report's context lacks %s's summary %q:\n%s", id, summary(id), summary("report"))
		}
	}
	t.Logf("the plan's 3 tasks done by %d agents %s after the operator's apply was asked for (3 run-tasks: apply, wait, list)", len(holders), took.Round(time.Millisecond))
}

// lastLine is out's last non-empty line.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
