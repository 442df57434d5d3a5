package dockerflock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ai-flock/ai-flock/infra/dockerflock"
	"github.com/ai-flock/ai-flock/infra/flock"
)

// The agent script runs as root on the host. An agent owns everything inside
// its directory, so it can swap anything there for a symlink to any host
// path; the script must never chown or chmod through one. Runs the real
// script with sh as root (CI is root).
func TestAgentScriptNeverFollowsAgentSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("FLOCK_REQUIRE_DOCKER") == "1" {
			t.Fatal("needs root to run the host script (CI runs as root)")
		}
		t.Skip("needs root to run the host script")
	}
	root := t.TempDir()
	n := 2
	m, err := flock.Config{Target: "docker", AgentCount: &n, Shared: flock.SharedConfig{Root: filepath.Join(root, "shared"), StateRoot: filepath.Join(root, "state")}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) (string, error) {
		cmd := exec.Command("sh", "-s")
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(dockerflock.LayoutScript(m)); err != nil {
		t.Fatalf("layout: %v\n%s", err, out)
	}
	a1, a2 := m.Agents[0], m.Agents[1]
	for _, a := range m.Agents {
		if out, err := run(dockerflock.AgentScript(m, a, "SEED")); err != nil {
			t.Fatalf("%s: %v\n%s", a.ID, err, out)
		}
	}
	victim := m.Shared.AgentDir(a2.ID) // another agent's directory
	hostDir := filepath.Join(root, "host-etc")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, os.FileMode) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()
	}

	// What agent-1 can do with its own key inside its own directory: make
	// tasks/ and inbox/ symlinks to another agent's directory and to a host dir.
	dir1 := m.Shared.AgentDir(a1.ID)
	for name, target := range map[string]string{"tasks": victim, "inbox": hostDir} {
		_ = os.RemoveAll(filepath.Join(dir1, name))
		if err := os.Symlink(target, filepath.Join(dir1, name)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(dockerflock.AgentScript(m, a1, "SEED2")); err != nil {
		t.Fatalf("re-running agent-1's script: %v\n%s", err, out)
	}
	if uid, mode := owner(victim); uid != uint32(a2.UID) || mode != 0o700 {
		t.Fatalf("agent-2's directory is now uid %d mode %o: the script followed agent-1's symlink", uid, mode)
	}
	if uid, mode := owner(hostDir); uid != 0 || mode != 0o755 {
		t.Fatalf("a host directory is now uid %d mode %o: the script followed agent-1's symlink", uid, mode)
	}

	// The directory and log themselves sit in root's directories; were they
	// ever not what they should be, the script refuses rather than follow.
	if err := os.Rename(dir1, dir1+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, dir1); err != nil {
		t.Fatal(err)
	}
	out, err := run(dockerflock.AgentScript(m, a1, "SEED3"))
	if err == nil || !strings.Contains(out, "refusing to prepare "+dir1+": a symbolic link") {
		t.Fatalf("agent directory replaced by a symlink: err %v, %q", err, out)
	}
	if uid, mode := owner(hostDir); uid != 0 || mode != 0o755 {
		t.Fatalf("host directory changed to uid %d mode %o", uid, mode)
	}
	log := m.Shared.LogFile(a2.ID)
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(hostDir, "passwd"), log); err != nil {
		t.Fatal(err)
	}
	out, err = run(dockerflock.AgentScript(m, a2, "SEED4"))
	if err == nil || !strings.Contains(out, "refusing to prepare "+log+": a symbolic link") {
		t.Fatalf("log replaced by a symlink: err %v, %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "passwd")); !os.IsNotExist(err) {
		t.Fatalf("the script created the symlink's target: %v", err)
	}
}
