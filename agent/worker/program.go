//go:build unix

package worker

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/agent/logfile"
	"github.com/ai-flock/ai-flock/protocol"
)

// The agent program is a long-lived process (an AI agent's own loop) the
// agent runs beside its tasks: started once the agent takes tasks, in the
// agent's own directory, with the allow-listed environment and the FLOCK_*
// variables that lead it to its directory, its inbox and the bus (through
// `flock-agent mcp`). When it exits it is started again after a backoff
// that doubles from programBackoff to programBackoffMax, and starts over
// once a run has lasted programSteady. Each start and exit is an event. On
// drain it gets SIGTERM, then SIGKILL after the grace period. Its output
// goes to program.log in the agent's directory, bounded like the agent's log.

const (
	programBackoff    = time.Second
	programBackoffMax = time.Minute
	programSteady     = time.Minute
	programLogMax     = 4 << 20
	programLogName    = "program.log"
)

// superviseProgram runs the agent program until ctx ends.
func (a *Agent) superviseProgram(ctx context.Context) {
	out, err := logfile.Open(filepath.Join(a.cfg.AgentDir(), programLogName), programLogMax)
	if err != nil {
		a.log.Error("agent program: no log file: not started", "err", err)
		a.event(protocol.EventProgramExited, "", "not started: "+err.Error())
		return
	}
	defer out.Close()
	backoff := programBackoff
	for {
		start := time.Now()
		how := a.runProgram(ctx, out)
		if ctx.Err() != nil {
			a.event(protocol.EventProgramExited, "", how+"; stopped with the agent")
			return
		}
		if time.Since(start) >= programSteady {
			backoff = programBackoff
		}
		a.log.Warn("agent program exited: starting it again", "how", how, "restart_in", backoff.String())
		a.event(protocol.EventProgramExited, "", fmt.Sprintf("%s; starting again in %s", how, backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, programBackoffMax)
	}
}

// runProgram runs the program once and says how it ended.
func (a *Agent) runProgram(ctx context.Context, out *logfile.File) string {
	p := a.cfg.Program
	cmd := exec.Command(p[0], p[1:]...)
	cmd.Dir = a.cfg.AgentDir()
	cmd.Env = a.programEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "could not start: " + err.Error()
	}
	pid := cmd.Process.Pid
	a.programUp.Store(true)
	defer a.programUp.Store(false)
	a.log.Info("agent program started", "pid", pid, "program", p[0])
	a.event(protocol.EventProgramStarted, strconv.Itoa(pid), p[0])
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(a.cfg.Grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			err = <-done
		}
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit code 0"
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return "exit code " + strconv.Itoa(ee.ExitCode())
	case errors.As(err, &ee):
		return "killed by signal " + signalOf(ee.ProcessState)
	default:
		return err.Error()
	}
}

// programEnv is the program's environment: the allow-listed variables of
// the agent, then the FLOCK_* ones.
func (a *Agent) programEnv() []string {
	return append(append([]string(nil), a.env...),
		"FLOCK_AGENT_ID="+a.cfg.ID,
		"FLOCK_AGENT_DIR="+a.cfg.AgentDir(),
		"FLOCK_INBOX_DIR="+a.inboxDir,
		"FLOCK_TASKS_DIR="+a.tasksDir,
		"FLOCK_SHARED_DIR="+a.cfg.SharedDir,
		protocol.EnvCLINATSURL+"="+a.cfg.URL,
		protocol.EnvCLINkeyFile+"="+a.keyFile,
	)
}
