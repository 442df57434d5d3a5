// Package pid1 is an agent task's init on aws (`flock-agent init`): PID 1
// of the agent's container, it runs the agent's runtime as its child with
// the child's output in a pipe of its own, copies that pipe to the
// container's output (CloudWatch Logs) through a logbound.Bound, reaps
// every orphan, and passes signals on to the child.
//
// Why a process of our own and not ECS's init: every process of an agent
// runs as the agent's UID, and a process may take the descriptors of
// another process of its UID (pidfd_getfd(2), ptrace(2)), the container's
// output among PID 1's; so with any other PID 1 an agent's program could
// write to CloudWatch Logs past any bound in the runtime. This one makes
// itself not dumpable first, which takes its descriptors, memory and
// environment from every process without CAP_SYS_PTRACE (agents have no
// capabilities), /proc/1/fd included. Whatever an agent's processes do
// reach (the runtime's own output, the pipe init reads) goes through the
// bound.
package pid1

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ai-flock/ai-flock/agent/logbound"
)

// Config is what init runs and how.
type Config struct {
	// Args are the child's path and arguments.
	Args   []string
	Env    []string
	Limits logbound.Limits
	// Out is the container's output.
	Out io.Writer
	// Grace is how long the child's pipe is still read after the child
	// exited (a process of the agent holding the pipe open cannot keep the
	// task up); 0: 2 s.
	Grace time.Duration
}

// forwarded are the signals init passes on to the child (SIGKILL and
// SIGSTOP cannot be caught; from inside the container they do not reach
// PID 1 at all).
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Run runs the child until it exits and returns its exit status (128 +
// the signal's number when a signal ended it), or 1 when init cannot
// start it safely.
func Run(c Config) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(c.Out, `{"level":"ERROR","msg":%q}`+"\n", "flock-agent init: "+fmt.Sprintf(format, a...))
		return 1
	}
	if len(c.Args) == 0 {
		return fail("no command to run")
	}
	// First: nothing of the agent's may open this process's descriptors.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("cannot make itself not dumpable (its output would be open to the agent's processes): %v", err)
	}
	// Orphans come to init to be reaped: to PID 1 in the container; to
	// init as a subreaper wherever else it runs.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("cannot become its children's reaper: %v", err)
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	defer signal.Stop(chld)

	pr, pw, err := os.Pipe()
	if err != nil {
		return fail("pipe: %v", err)
	}
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return fail("%v", err)
	}
	p, err := os.StartProcess(c.Args[0], c.Args, &os.ProcAttr{Env: c.Env, Files: []*os.File{null, pw, pw}})
	null.Close()
	pw.Close()
	if err != nil {
		return fail("start %s: %v", c.Args[0], err)
	}
	bound := logbound.New(c.Out, c.Limits, nil)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(bound, pr)
	}()
	tick := time.NewTicker(logbound.NoteEvery)
	defer tick.Stop()
	code := -1
	for code < 0 {
		select {
		case s := <-sigs:
			_ = p.Signal(s)
		case <-chld:
			code = reap(p.Pid)
		case <-tick.C:
			_ = bound.Tick()
		}
	}
	select {
	case <-copied:
	case <-time.After(c.Grace):
	}
	_ = bound.Close()
	return code
}

// reap collects every exited child (the runtime, and any orphan the kernel
// gave PID 1) and returns the runtime's status once it is among them, else -1.
func reap(child int) int {
	code := -1
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return code
		}
		if pid == child {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
		}
	}
}
