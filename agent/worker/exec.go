package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// execRun is what a run of the board's takes from runExec besides a task's:
// the parent of the process's context and FLOCK_* variables of its own, and
// what it gets back: the ends of stdout and stderr.
type execRun struct {
	parent                 context.Context // a.runCtx when nil
	env                    []string        // added after the agent's FLOCK_* variables
	stdoutTail, stderrTail []byte          // filled in by runExec
}

// runExec runs an exec task in its directory and fills res (and x, when
// given). It returns errHandback when the agent's grace period ended the run
// (the task is to be redelivered, not reported).
func (a *Agent) runExec(msg delivery, t *protocol.Task, res *protocol.Result, keep time.Duration, x *execRun, span string) error {
	dir := a.taskDir(t.ID)
	res.Dir = dir
	ended := a.running.add(t.ID, t.Kind, span)
	a.nudgeHeartbeat()
	// Its end is seen soon too: the gateway ties an untraced call to an
	// agent's one running task, as the last heartbeat lists them.
	defer func() { ended(); a.nudgeHeartbeat() }()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errorResult(res, "task directory: %v", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return errorResult(res, "task directory: %v", err)
	}
	defer root.Close()
	for _, stale := range []string{"result.json", "stdout", "stderr"} {
		_ = root.Remove(stale)
	}
	if err := root.WriteFile("task.json", msg.Data(), 0o600); err != nil {
		return errorResult(res, "task directory: %v", err)
	}
	names := make([]string, 0, len(t.Files))
	for n := range t.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// os.Root refuses any path, symlinks included, that leads out of the task directory.
		if p := path.Dir(n); p != "." {
			if err := root.MkdirAll(p, 0o700); err != nil {
				return errorResult(res, "files[%s]: %v", n, err)
			}
		}
		if err := root.WriteFile(n, []byte(t.Files[n]), 0o600); err != nil {
			return errorResult(res, "files[%s]: %v", n, err)
		}
	}
	work := dir
	if t.Dir != "" {
		if err := root.MkdirAll(t.Dir, 0o700); err != nil {
			return errorResult(res, "dir: %v", err)
		}
		work = filepath.Join(dir, filepath.FromSlash(t.Dir))
		if err := inside(dir, work); err != nil {
			return errorResult(res, "dir: %v", err)
		}
	}

	limit := a.cfg.MaxOutputBytes
	if t.MaxOutputBytes > 0 && t.MaxOutputBytes < limit {
		limit = t.MaxOutputBytes
	}
	stdout, err := newCapture(root, "stdout", limit)
	if err != nil {
		return errorResult(res, "stdout file: %v", err)
	}
	defer stdout.close()
	stderr, err := newCapture(root, "stderr", limit)
	if err != nil {
		return errorResult(res, "stderr file: %v", err)
	}
	defer stderr.close()

	timeout := taskTimeout(t, a.cfg.TaskTimeout)
	parent := a.runCtx
	if x != nil && x.parent != nil {
		parent = x.parent
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Command, t.Args...)
	cmd.Dir = work
	cmd.Env = a.taskEnv(t, dir, res.Attempt)
	if x != nil {
		cmd.Env = append(cmd.Env, x.env...)
	}
	if span != "" {
		// The task's span: last, so a TRACEPARENT in the task's own
		// environment does not stand in for the operator's trace.
		cmd.Env = append(cmd.Env, protocol.EnvTraceparent+"="+span)
	}
	if t.Stdin != "" {
		cmd.Stdin = strings.NewReader(t.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	killGroup(cmd)

	if err := cmd.Start(); err != nil {
		return errorResult(res, "start %q: %v", t.Command, err)
	}
	stop := progress(msg, keep)
	err = cmd.Wait()
	stop()

	res.Stdout, res.StdoutBytes = string(stdout.head), stdout.total
	res.Stderr, res.StderrBytes = string(stderr.head), stderr.total
	res.Truncated = stdout.truncated() || stderr.truncated()
	if x != nil {
		x.stdoutTail, x.stderrTail = stdout.tail, stderr.tail
	}
	var ee *exec.ExitError
	switch {
	case a.handback.Load() && a.runCtx.Err() != nil:
		return errHandback
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Status, res.Error = protocol.StatusTimeout, fmt.Sprintf("killed after its timeout of %s", timeout)
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		zero := 0
		res.Status, res.ExitCode = protocol.StatusOK, &zero
		if err != nil {
			res.Error = "a child process kept the output open after the task exited; output may be incomplete"
		}
	case errors.As(err, &ee):
		code := ee.ExitCode()
		res.Status = protocol.StatusFailed
		if code >= 0 {
			res.ExitCode = &code
		} else {
			res.Signal = signalOf(ee.ProcessState)
			res.Error = "killed by signal " + res.Signal
		}
	default:
		res.Status, res.Error = protocol.StatusError, err.Error()
	}
	return nil
}

// taskEnv is the process environment: the allow-listed variables of the
// agent, then the task's own, then the FLOCK_* ones the agent sets.
func (a *Agent) taskEnv(t *protocol.Task, dir string, attempt int) []string {
	env := append([]string(nil), a.env...)
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+t.Env[k])
	}
	return append(env,
		"FLOCK_AGENT_ID="+a.cfg.ID,
		"FLOCK_TASK_ID="+t.ID,
		"FLOCK_TASK_DIR="+dir,
		"FLOCK_TASK_ATTEMPT="+strconv.Itoa(attempt),
		"FLOCK_SHARED_DIR="+a.cfg.SharedDir,
		protocol.EnvCLINATSURL+"="+a.cfg.URL,
		protocol.EnvCLINkeyFile+"="+a.keyFile,
	)
}

// inside checks that p, symlinks resolved, is dir or below it.
func inside(dir, p string) error {
	rd, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	rp, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	if rp != rd && !strings.HasPrefix(rp, rd+string(filepath.Separator)) {
		return fmt.Errorf("%s leads out of the task directory", p)
	}
	return nil
}

// progress tells the bus every period that the task is still being worked on,
// so a long task is not redelivered while it runs.
func progress(msg delivery, period time.Duration) (stop func()) {
	if period <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// capture keeps up to max bytes of a stream in a file and the first
// inlineMax bytes in memory, and counts everything; it never fails a write,
// so a chatty task is capped, not broken.
type capture struct {
	f      *os.File
	max    int64
	kept   int64
	total  int64
	inline int
	head   []byte
	tail   []byte // the last tailMax bytes written (a board task's summary)
}

// tailMax is how much of the end of a stream a capture keeps in memory.
const tailMax = protocol.MaxBoardSummary

func newCapture(root *os.Root, name string, max int64) (*capture, error) {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return &capture{f: f, max: max, inline: int(min(max, inlineMax))}, nil
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.max - c.kept; room > 0 {
		w := p
		if int64(len(w)) > room {
			w = w[:room]
		}
		if _, err := c.f.Write(w); err != nil {
			c.max = c.kept // disk full or similar: stop writing, keep counting
		} else {
			c.kept += int64(len(w))
		}
	}
	if room := c.inline - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, n)]...)
	}
	if n >= tailMax {
		c.tail = append(c.tail[:0], p[n-tailMax:]...)
	} else {
		if drop := len(c.tail) + n - tailMax; drop > 0 {
			c.tail = append(c.tail[:0], c.tail[drop:]...)
		}
		c.tail = append(c.tail, p...)
	}
	return n, nil
}

func (c *capture) truncated() bool { return c.total > int64(len(c.head)) || c.total > c.kept }

func (c *capture) close() { _ = c.f.Close() }

var errHandback = errors.New("handed back")

// allowedEnv keeps the variables of environ named in allow ("NAME" or
// "PREFIX*"), and the gateway's (protocol.GatewayAgentVars) always.
func allowedEnv(allow []string, environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(protocol.GatewayAgentVars, name) {
			out = append(out, kv)
			continue
		}
		if !ok || strings.HasPrefix(name, "FLOCK_") {
			continue
		}
		for _, p := range allow {
			if name == p || (strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*"))) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}
