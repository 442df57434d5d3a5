//go:build unix

package worker_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// A program that keeps failing is started again with a backoff that
// doubles, and every start and exit is an event.
func TestAgentProgramRestartsWithBackoff(t *testing.T) {
	testkit.SkipInShort(t, "slow: waits out the restart backoff; make check runs it")
	t.Parallel()
	e := newEnv(t, flockWith(1, nil))
	e.start("agent-1", func(c *worker.Config) { c.Program = []string{self, "tool", "exit", "3"} })

	var starts, exits []protocol.Event
	for range 3 {
		starts = append(starts, e.waitEvent("agent-1", protocol.EventProgramStarted, 10*time.Second))
		if len(exits) < 2 {
			exits = append(exits, e.waitEvent("agent-1", protocol.EventProgramExited, 10*time.Second))
		}
	}
	for i, want := range []string{"exit code 3; starting again in 1s", "exit code 3; starting again in 2s"} {
		if exits[i].Detail != want {
			t.Errorf("exit %d: %q, want %q", i+1, exits[i].Detail, want)
		}
	}
	if pid, err := strconv.Atoi(starts[0].Ref); err != nil || pid <= 0 || starts[0].Detail != self {
		t.Errorf("started event %+v: want the PID and the program", starts[0])
	}
	// The second wait is about twice the first (1 s, then 2 s).
	first, second := starts[1].Time.Sub(exits[0].Time), starts[2].Time.Sub(exits[1].Time)
	if first < 900*time.Millisecond || second < 1900*time.Millisecond {
		t.Errorf("started again %s and %s after exiting: want 1 s, then 2 s", first, second)
	}
}

// The program runs in the agent's directory with the allow-listed
// environment and the FLOCK_* variables (nothing else of the agent's), and
// it stops with the agent: SIGTERM, then SIGKILL after the grace period for
// one that ignores it (this one does: the test binary catches SIGTERM), and
// the exit is reported.
func TestAgentProgramEnvironmentAndStop(t *testing.T) {
	t.Setenv("PROGRAM_TEST_NOT_ALLOWED", "leak")
	e := newEnv(t, flockWith(1, nil))
	mark := filepath.Join(t.TempDir(), "pid")
	a := e.start("agent-1", func(c *worker.Config) { c.Program = []string{self, "tool", "env"} })
	e.waitEvent("agent-1", protocol.EventProgramExited, 10*time.Second)
	agentDir := filepath.Join(e.shared, "agents", "agent-1")
	env := testkit.ReadFile(t, filepath.Join(agentDir, "program.log"))
	for _, want := range []string{
		"FLOCK_AGENT_ID=agent-1\n",
		"FLOCK_AGENT_DIR=" + agentDir + "\n",
		"FLOCK_INBOX_DIR=" + filepath.Join(agentDir, "inbox") + "\n",
		"FLOCK_TASKS_DIR=" + filepath.Join(agentDir, "tasks") + "\n",
		protocol.EnvCLINATSURL + "=" + e.f.URL + "\n",
		protocol.EnvCLINkeyFile + "=",
	} {
		mustContain(t, "the program's environment", env, want)
	}
	if strings.Contains(env, "PROGRAM_TEST_NOT_ALLOWED") || strings.Contains(env, "NATS_NKEY_SEED") {
		t.Fatalf("the program got a variable the allow-list does not pass:\n%s", env)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	// A program that runs until the agent stops, and ignores SIGTERM.
	a = e.start("agent-1", func(c *worker.Config) {
		c.Program = []string{self, "tool", "sleep", "1h", "--mark", mark}
		c.Grace = time.Second
	})
	e.waitEvent("agent-1", protocol.EventProgramStarted, 10*time.Second)
	// The mark is created before the PID is written into it.
	var pid int
	testkit.WaitFor(t, 10*time.Second, "the program's PID in its mark", func() bool {
		b, _ := os.ReadFile(mark)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil
	})
	stopped := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopped); took < time.Second || took > 4*time.Second {
		t.Errorf("the agent took %s to stop with its program running: want the 1 s grace period and little more", took)
	}
	ev := e.waitEvent("agent-1", protocol.EventProgramExited, 10*time.Second)
	if ev.Detail != "killed by signal killed; stopped with the agent" {
		t.Errorf("exit event %q", ev.Detail)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the program (pid %d) still runs after the agent stopped", pid)
	}
	_ = os.Remove(mark)
}
