package pid1

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ai-flock/ai-flock/agent/logbound"
)

// The test binary plays init and the runtime (PID1_TEST_ROLE), so init runs
// as a process of its own: as nobody when the tests run as root, so that
// its child is an unprivileged process of init's UID, as an agent's are.
func TestMain(m *testing.M) {
	switch os.Getenv("PID1_TEST_ROLE") {
	case "init":
		os.Exit(Run(Config{
			Args: []string{os.Args[0]}, Env: role("child"),
			Limits: logbound.Limits{Rate: 4096, Burst: 8192, MaxLine: 256}, Out: os.Stdout,
		}))
	case "child":
		child()
		return
	case "orphan":
		time.Sleep(200 * time.Millisecond)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// role is the environment with PID1_TEST_ROLE set to r (once: a second
// entry would not replace the first for os.StartProcess).
func role(r string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PID1_TEST_ROLE=") {
			env = append(env, kv)
		}
	}
	return append(env, "PID1_TEST_ROLE="+r)
}

// child: the runtime, and an agent's process writing where it should not.
func child() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", os.Getppid()), os.O_WRONLY, 0); err != nil {
		fmt.Printf("open init's output: refused: %v\n", err)
	} else {
		fmt.Fprintln(f, "open init's output: WRITTEN PAST THE BOUND")
		fmt.Println("open init's output: opened")
	}
	// Or take the descriptor itself (no reopen, so no check of the pipe's
	// owner): allowed to a process of the same UID unless init is not dumpable.
	if pidfd, err := unix.PidfdOpen(os.Getppid(), 0); err != nil {
		fmt.Printf("take init's output: pidfd_open: %v\n", err)
	} else if fd, err := unix.PidfdGetfd(pidfd, 1, 0); err != nil {
		fmt.Printf("take init's output: refused: %v\n", err)
	} else {
		_, _ = unix.Write(fd, []byte("take init's output: WRITTEN PAST THE BOUND\n"))
		fmt.Println("take init's output: taken")
	}
	orphan := exec.Command(os.Args[0])
	orphan.Env = role("orphan")
	_ = orphan.Start() // never waited for: init reaps it
	fmt.Printf("orphan %d\n", orphan.Process.Pid)
	line := strings.Repeat("f", 99)
	for i := 0; i < 2000; i++ { // 200 KB at once
		fmt.Println(line)
	}
	fmt.Println("ready")
	<-term
	fmt.Println("got TERM")
	os.Exit(7)
}

func TestInitBoundsReapsAndPassesSignals(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pid1-") // t.TempDir's parent is 0700: nobody could not run the copy
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pid1.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = role("init")
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	var passed int
	for sc.Scan() {
		lines = append(lines, sc.Text())
		passed += len(sc.Bytes()) + 1
		if sc.Text() == "ready" {
			break
		}
	}
	// The flood ran into the bound; "ready" passed once the bucket had room.
	time.Sleep(300 * time.Millisecond) // the orphan exits meanwhile
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(out)
	err = cmd.Wait()
	elapsed := time.Since(start)
	lines = append(lines, strings.Split(strings.TrimSpace(string(rest)), "\n")...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("init exited %v, want the child's status 7", err)
	}
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "open init's output: refused") || !strings.Contains(all, "take init's output: refused") || strings.Contains(all, "PAST THE BOUND") {
		t.Errorf("the child opened init's output (/proc/<init>/fd/1):\n%s", head(all))
	}
	if !strings.Contains(all, "got TERM") {
		t.Errorf("SIGTERM did not reach the child:\n%s", head(all))
	}
	var note map[string]any
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == logbound.NoteMsg {
			note = m
		}
	}
	if note == nil || note["dropped_bytes"].(float64) < 150000 {
		t.Errorf("no note of the flood's dropped bytes (%v):\n%s", note, head(all))
	}
	if bound := 8192 + 4096*elapsed.Seconds() + 1024; float64(passed) > bound {
		t.Errorf("%d bytes passed in %s, bound %.0f", passed, elapsed, bound)
	}
	for _, l := range lines {
		if pid, ok := strings.CutPrefix(l, "orphan "); ok {
			if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
				t.Errorf("the orphan %s is still there after init exited: %s", pid, st)
			}
		}
	}
}

func head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}
