package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's operator commands, run as a user runs them (make, with the
// operator's key file), against the flock: a task for every agent that runs
// a process in the agent's image, and a brief watch of the heartbeats.
func TestReadmeOperatorCommands(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := need(t)
	key := filepath.Join(t.TempDir(), "operator.nk")
	if err := os.WriteFile(key, []byte(f.seed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	make := func(timeout time.Duration, target string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", target, "OPERATOR_KEY="+key)
		cmd.Dir = root
		// make runs `go run`, which runs the CLI: stop the whole group, as Ctrl-C does.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			err = nil // ran until its time was up: what a watch does
		}
		return string(out), err
	}

	out, err := make(3*time.Minute, "flock-test")
	if err != nil {
		t.Fatalf("make flock-test: %v\n%s", err, out)
	}
	for _, id := range f.agents {
		if !strings.Contains(out, "["+id+"] ok") {
			t.Errorf("make flock-test: no successful result from %s:\n%s", id, out)
		}
	}
	if n := strings.Count(out, "hello from the operator"); n < len(f.agents) {
		t.Errorf("make flock-test: the task's output appears %d times, want one per agent (%d):\n%s", n, len(f.agents), out)
	}

	out, err = make(f.heartbeat+20*time.Second, "flock-watch")
	if err != nil {
		t.Fatalf("make flock-watch: %v\n%s", err, out)
	}
	for _, id := range f.agents[:2] {
		if !strings.Contains(out, "heartbeat "+id+" ") {
			t.Errorf("make flock-watch: no heartbeat from %s:\n%s", id, out)
		}
	}
}
