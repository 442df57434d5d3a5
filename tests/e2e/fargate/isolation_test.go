package fargate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

const probe = "/shared/common/bin/probe"

// agentTask is agent id's current task and its container.
func agentTask(t *testing.T, id string) (*fargate.Task, string) {
	t.Helper()
	cur, _, ok := cluster.Service(flockName + "-" + id)
	if !ok || cur == nil || cur.State != fargate.StateRunning {
		t.Fatalf("agent %s has no running task: %+v", id, cur)
	}
	return cur, cur.Container("agent")
}

// inAgent runs the probe in agent id's container, as its user.
func inAgent(t *testing.T, id string, args ...string) (string, bool) {
	t.Helper()
	_, c := agentTask(t, id)
	res, err := engine.Exec(context.Background(), c, append([]string{probe}, args...))
	if err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	return strings.TrimSpace(res.Stdout + res.Stderr), res.ExitCode == 0
}

func ns() string { return flockName + ".flock.internal" }

// What an agent's task reaches, as the security groups say: the bus (each
// node by its Cloud Map name) and the gateway, and nothing else: not
// another agent, not the internet (no route out: the private subnets have
// none, and no rule of the agents' group opens one).
func TestFargateAgentReachesOnlyTheBusAndTheGateway(t *testing.T) {
	need(t)
	for _, n := range []int{1, 2, 3} {
		if out, ok := inAgent(t, "agent-1", "dial", fmt.Sprintf("bus-%d.%s:4222", n, ns())); !ok {
			t.Errorf("agent-1 does not reach bus-%d: %s", n, out)
		}
	}
	if out, ok := inAgent(t, "agent-1", "dial", awsflock.GatewayHost(ns())+":8080"); !ok {
		t.Errorf("agent-1 does not reach the gateway: %s", out)
	}
	// Another agent, listening: agent-1 finds no way to it.
	a2, _ := agentTask(t, "agent-2")
	_, c2 := agentTask(t, "agent-2")
	if err := engine.ExecDetached(context.Background(), c2, []string{probe, "listen", ":7777"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if out, ok := inAgent(t, "agent-1", "dial", a2.Addr.String()+":7777"); ok {
		t.Errorf("agent-1 reaches agent-2 at %s: %s", a2.Addr, out)
	}
	if out, ok := inAgent(t, "agent-2", "dial", "127.0.0.1:7777"); !ok {
		t.Errorf("agent-2's own listener does not answer it (the probe is wrong, not the network): %s", out)
	}
	// The internet: the fake model API, by name and by address.
	if out, ok := inAgent(t, "agent-1", "dial", modelHost+":9090"); ok {
		t.Errorf("agent-1 reaches the model API directly: %s", out)
	}
	if out, ok := inAgent(t, "agent-1", "dial", fakeModelAddr(t)); ok {
		t.Errorf("agent-1 reaches the model API at its address %s: %s", fakeModelAddr(t), out)
	}
}

// An agent's task as Fargate runs it: its own UID (not the image's), no
// capabilities, a read-only root, writable /tmp and /run (the image's
// declared volumes, mode 1777: a root-owned 0755 directory would refuse
// its UID), its own directory writable, common read-only; and the task's
// CPU and memory held for the task as a whole.
func TestFargateAgentTaskHardening(t *testing.T) {
	need(t)
	task, _ := agentTask(t, "agent-1")
	out, _ := inAgent(t, "agent-1", "id")
	uid := 0
	for _, a := range cluster.Model().AccessPoints {
		if a.Path == awsflock.EFSAgentDir("agent-1") {
			uid = a.UID
		}
	}
	if uid == 0 || uid == 65532 || !strings.Contains(out, fmt.Sprintf(`"uid":"%d"`, uid)) || !strings.Contains(out, `"CapEff":"0000000000000000"`) {
		t.Errorf("agent-1 runs as %s, want its own UID %d (not the image's 65532) with no capability", out, uid)
	}
	for path, want := range map[string]bool{
		"/tmp/probe": true, "/run/probe": true, "/shared/agents/agent-1/probe": true,
		"/probe": false, "/shared/common/probe": false, "/etc/probe": false,
	} {
		if out, ok := inAgent(t, "agent-1", "write", path); ok != want {
			t.Errorf("agent-1 writing %s: %v (%s), want %v", path, ok, out, want)
		}
	}
	limit := func(ctrl, file string) int64 {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, "flock-fargate", task.ID, file))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	if got, want := limit("memory", "memory.limit_in_bytes"), int64(task.Def.MemoryMiB)<<20; got != want {
		t.Errorf("the task's memory limit is %d bytes, want the task size's %d", got, want)
	}
	if got, want := limit("cpu", "cpu.cfs_quota_us"), int64(task.Def.CPU)*100000/1024; got != want {
		t.Errorf("the task's CPU quota is %d µs per 100 ms, want the task size's %d", got, want)
	}
}

// The bus away from every agent for two minutes (each node cut off from
// every agent's network; the nodes stay healthy): no agent task is
// replaced, since an agent is healthy while its runtime works, and each
// says its bus is unreachable. When the bus is back, the flock works.
func TestFargateBusOutageReplacesNoAgent(t *testing.T) {
	need(t)
	if testing.Short() {
		t.Skip("two minutes of outage")
	}
	ctx := context.Background()
	before := map[string]string{}
	for i := 1; i <= agents; i++ {
		task, _ := agentTask(t, fmt.Sprintf("agent-%d", i))
		before[task.Service] = task.ID
	}
	buses := []string{flockName + "-bus-1", flockName + "-bus-2", flockName + "-bus-3"}
	cut := func(on bool) {
		for _, b := range buses {
			for svc := range before {
				if err := cluster.Cut(ctx, b, svc, on); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cut(true)
	restored := false
	defer func() {
		if !restored {
			cut(false)
		}
	}()
	start := time.Now()
	for time.Since(start) < 2*time.Minute {
		time.Sleep(10 * time.Second)
		for svc, id := range before {
			cur, hist, _ := cluster.Service(svc)
			if cur == nil || cur.ID != id || len(hist) != 1 {
				t.Fatalf("%s's task was replaced %s into the outage (%d tasks; the first stopped: %s)", svc, time.Since(start).Round(time.Second), len(hist), hist[0].StopReason)
			}
			if cur.Health != fargate.HealthHealthy {
				t.Fatalf("%s is %s %s into the outage", svc, cur.Health, time.Since(start).Round(time.Second))
			}
		}
	}
	_, c := agentTask(t, "agent-1")
	res, err := engine.Exec(ctx, c, []string{"/flock-agent", "health"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "bus unreachable") {
		t.Errorf("agent-1's health during the outage: %+v %v, want healthy with its bus unreachable", res, err)
	}
	cut(false)
	restored = true
	out := runOperator(t, "task", "--all", "--json", "--", "/flock-agent", "tool", "echo", "after the outage")
	if rs := results(t, out); len(rs) != agents {
		t.Fatalf("after the outage, %d results of %d:\n%s", len(rs), agents, out)
	}
}
