package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

func taskEcho(id, text string) protocol.Task {
	return protocol.Task{ID: id, Kind: protocol.KindEcho, Args: []string{text}}
}

// taskExec runs one of the agent binary's built-in tools (the image is FROM scratch).
func taskExec(id string, args ...string) protocol.Task {
	return protocol.Task{ID: id, Kind: protocol.KindExec, Command: "/flock-agent", Args: append([]string{"tool"}, args...)}
}

// publishExec publishes to agent's own subject the taskExec of args, its ID
// made by taskID from tag, and returns the ID.
func publishExec(t *testing.T, js jetstream.JetStream, agent, tag string, args ...string) string {
	t.Helper()
	id := taskID(t, tag)
	publish(t, js, protocol.TaskSubject(agent), taskExec(id, args...))
	return id
}

// Each routing mode, with the result files appearing in the agent's directory on the host.
func TestTaskRouting(t *testing.T) {
	f := need(t)
	_, js, rs := jsResults(t)

	t.Run("to each agent", func(t *testing.T) {
		want := map[string]string{}
		for _, a := range f.agents {
			id := taskID(t, a)
			want[id] = a
			publish(t, js, protocol.TaskSubject(a), taskExec(id, "echo", "hello", a))
		}
		got := rs.collect(t, 60*time.Second, func(m map[string][]protocol.Result) bool { return countKeys(m, want) == len(want) })
		for id, a := range want {
			r := got[id][0]
			if !r.OK() || r.Agent != a || strings.TrimSpace(r.Stdout) != "hello "+a {
				t.Errorf("%s: result %+v", id, r)
			}
			dir := filepath.Join(f.sharedRoot, "agents", a, "tasks", id)
			for _, file := range []string{"task.json", "stdout", "result.json"} {
				if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
					t.Errorf("%s: %v", a, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "stdout")); strings.TrimSpace(string(b)) != "hello "+a {
				t.Errorf("%s: stdout file %q", a, b)
			}
		}
	})

	t.Run("to the pool: each task runs exactly once", func(t *testing.T) {
		want := map[string]string{}
		for i := 0; i < 30; i++ {
			id := taskID(t, fmt.Sprint(i))
			want[id] = ""
			publish(t, js, protocol.SubjectTasksPool, taskEcho(id, "pooled"))
		}
		got := rs.collect(t, 60*time.Second, func(m map[string][]protocol.Result) bool { return countKeys(m, want) == len(want) })
		time.Sleep(2 * time.Second) // give a duplicate time to show up, then read again
		got = rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return true })
		by := map[string]int{}
		for id := range want {
			if n := len(got[id]); n != 1 {
				t.Errorf("pool task %s ran %d times", id, n)
				continue
			}
			by[got[id][0].Agent]++
		}
		if len(by) < 2 {
			t.Errorf("30 pool tasks all went to %v: the pool is not shared", by)
		}
		t.Logf("pool spread: %v", by)
	})

	t.Run("to all: every agent runs it", func(t *testing.T) {
		id := taskID(t, "all")
		publish(t, js, protocol.SubjectTasksAll, taskEcho(id, "everyone"))
		got := rs.collect(t, 60*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) >= len(f.agents) })
		seen := map[string]bool{}
		for _, r := range got[id] {
			if !r.OK() || seen[r.Agent] {
				t.Errorf("tasks.all result %+v (dup %v)", r, seen[r.Agent])
			}
			seen[r.Agent] = true
		}
		if len(seen) != len(f.agents) {
			t.Errorf("tasks.all reached %d of %d agents", len(seen), len(f.agents))
		}
	})
}

func countKeys(m map[string][]protocol.Result, want map[string]string) int {
	n := 0
	for id := range want {
		if len(m[id]) > 0 {
			n++
		}
	}
	return n
}

// The bus restarted mid-stream: no accepted task is lost and agents reconnect.
func TestBusRestart(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "restarts the bus: replay only")
	nc, js, rs := jsResults(t)
	want := map[string]string{}
	// Tasks that are still running when the bus goes away.
	for i := 0; i < 10; i++ {
		id := taskID(t, fmt.Sprint("slow", i))
		want[id] = ""
		publish(t, js, protocol.SubjectTasksPool, taskExec(id, "sleep", "1s"))
	}
	hb, err := nc.SubscribeSync(protocol.SubjectHeartbeats)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	restartedAt := time.Now()
	if err := f.engine.Restart(ctx, f.name+"-bus", 10); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Every agent is heard from again.
	heard := map[string]time.Duration{}
	deadline := time.Now().Add(60 * time.Second)
	for len(heard) < len(f.agents) && time.Now().Before(deadline) {
		msg, err := hb.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		if msg.Header == nil && time.Now().After(back) {
			var h protocol.Heartbeat
			if json.Unmarshal(msg.Data, &h) == nil && h.Time.After(back) && heard[h.Agent] == 0 {
				heard[h.Agent] = time.Since(back)
			}
		}
	}
	if len(heard) < len(f.agents) {
		t.Fatalf("only %d of %d agents came back after the bus restart", len(heard), len(f.agents))
	}
	var slowest time.Duration
	for _, d := range heard {
		slowest = max(slowest, d)
	}
	t.Logf("bus restart took %s; every agent heartbeating again %s after it was back", back.Sub(restartedAt).Round(time.Millisecond), slowest.Round(time.Millisecond))
	// Tasks sent after the restart too.
	for i := 0; i < 10; i++ {
		id := taskID(t, fmt.Sprint("after", i))
		want[id] = ""
		publishRetry(t, js, protocol.SubjectTasksPool, taskEcho(id, "after"))
	}
	got := rs.collect(t, 90*time.Second, func(m map[string][]protocol.Result) bool { return countKeys(m, want) == len(want) })
	t.Logf("all %d tasks (10 running across the restart, 10 sent after it) have results", len(want))
	for id := range want {
		ok := false
		for _, r := range got[id] {
			ok = ok || r.OK()
		}
		if !ok {
			t.Errorf("task %s: no ok result (%+v)", id, got[id])
		}
	}
}

// publishRetry publishes, retrying while the operator's connection recovers.
func publishRetry(t *testing.T, js jetstream.JetStream, subject string, task protocol.Task) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := tryPublish(js, subject, task)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", task.ID, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// An agent killed mid-task: the task is redelivered and completed.
func TestAgentKilledMidTask(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "kills an agent: replay only")
	a := f.agents[2]
	_, js, rs := jsResults(t)
	id := publishExec(t, js, a, "killed", "sleep", "3s")
	// Wait until the task directory appears: the agent is running it.
	dir := filepath.Join(f.sharedRoot, "agents", a, "tasks", id)
	testkit.WaitEvery(t, 20*time.Second, 100*time.Millisecond, "the agent to start the task (its task.json)", func() bool { _, err := os.Stat(filepath.Join(dir, "task.json")); return err == nil })
	ctx := context.Background()
	if err := f.engine.Kill(ctx, container(a), "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if err := f.engine.Start(ctx, container(a)); err != nil {
		t.Fatal(err)
	}
	got := rs.collect(t, 60*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) > 0 })
	r := got[id][0]
	if !r.OK() || r.Attempt < 2 || r.Agent != a {
		t.Fatalf("after the kill: result %+v, want ok on a redelivery", r)
	}
	t.Logf("task redelivered and completed %s after the kill (attempt %d)", time.Since(killedAt).Round(time.Millisecond), r.Attempt)
}

// The whole flock restarted: the shared directory survives.
func TestFlockRestart(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "restarts the flock: replay only")
	a := f.agents[1]
	nc, js, rs := jsResults(t)
	id := publishExec(t, js, a, "before", "write", "/shared/agents/"+a+"/keep.txt", "kept across restarts")
	rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) > 0 })
	nc.Close()

	// Worst case first: the bus goes down before the agents. Each agent must
	// still drain and exit 0 on SIGTERM within its grace period, not wait
	// for a bus that is gone until the engine SIGKILLs it.
	ctx := context.Background()
	if err := f.engine.Stop(ctx, f.name+"-bus", 30); err != nil {
		t.Fatal(err)
	}
	for _, x := range f.agents {
		start := time.Now()
		if err := f.engine.Stop(ctx, container(x), 30); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		code := inspect(t, container(x))["State"].(map[string]any)["ExitCode"].(float64)
		if code != 0 || took > 20*time.Second {
			t.Errorf("%s stopped with exit %v after %s: want a clean exit (0) within its grace period", x, code, took.Round(time.Millisecond))
		}
	}
	names := []string{f.name + "-bus"}
	for _, x := range f.agents {
		names = append(names, container(x))
	}
	for _, n := range names {
		if err := f.engine.Start(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.waitForHeartbeats(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	// A restarted agent still has its writable scratch space.
	mustSucceed(t, f.agents[0], "write", "/tmp/after-restart")
	mustSucceed(t, f.agents[0], "write", "/run/after-restart")
	if b, err := os.ReadFile(filepath.Join(f.sharedRoot, "agents", a, "keep.txt")); err != nil || string(b) != "kept across restarts" {
		t.Fatalf("after the restart: %q %v", b, err)
	}
	nc2, js2 := jsClient(t)
	rs2 := watchResults(t, nc2)
	id2 := taskID(t, "after")
	publish(t, js2, protocol.TaskSubject(a), taskExec(id2, "read", "/shared/agents/"+a+"/keep.txt"))
	got := rs2.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id2]) > 0 })
	if r := got[id2][0]; !r.OK() || !strings.Contains(r.Stdout, "kept across restarts") {
		t.Fatalf("agent cannot read its file after the restart: %+v", r)
	}
}

// The 10-agent flock's start time, measured in setup.
func TestStartTime(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "replay only")
	t.Logf("a %d-agent flock started (replay of every resource to every agent's first ready heartbeat) in %s", len(f.agents), f.startTime.Round(time.Millisecond))
	if f.startTime <= 0 {
		t.Fatal("start time not measured")
	}
}
