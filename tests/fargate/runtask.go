// aws ecs run-task: a task run on its own until it stops.

package fargate

import (
	"context"
	"fmt"
	"time"
)

// RunResult is a task run on its own (aws ecs run-task) once it stopped.
type RunResult struct {
	Task     *Task
	ExitCode int    // its first essential container's
	Output   string // that container's output
}

// RunTask runs a task of the task definition of family in the groups and
// subnets given (aws ecs run-task --network-configuration), with command
// overrides by container name, and waits until it stops.
func (c *Cluster) RunTask(ctx context.Context, family string, at Endpoint, overrides map[string][]string, timeout time.Duration) (RunResult, error) {
	var td *TaskDef
	for _, d := range c.m.TaskDefs {
		if d.Family == family {
			td = d
		}
	}
	if td == nil {
		return RunResult{}, fmt.Errorf("run-task: no task definition family %q", family)
	}
	return c.RunTaskDef(ctx, td, at, overrides, timeout)
}

// RunTaskDef is RunTask for a task definition of the caller's (tests of
// the replay's own semantics): checked as ECS checks one it registers.
func (c *Cluster) RunTaskDef(ctx context.Context, td *TaskDef, at Endpoint, overrides map[string][]string, timeout time.Duration) (RunResult, error) {
	if err := td.check(); err != nil {
		return RunResult{}, fmt.Errorf("register task definition %s: %w", td.Family, err)
	}
	t, err := c.startTask(ctx, td, at, "", "", overrides)
	if err != nil {
		return RunResult{}, err
	}
	essential := ""
	for _, ctr := range td.Containers {
		if ctr.IsEssential() {
			essential = ctr.Name
			break
		}
	}
	deadline := time.Now().Add(timeout)
	for t.State != StateStopped {
		if time.Now().After(deadline) {
			_ = c.stopTask(ctx, t, "run-task: timed out")
			return RunResult{Task: t}, fmt.Errorf("run-task %s %v: still running after %s", td.Family, overrides, timeout)
		}
		if err := c.observe(ctx, t); err != nil {
			return RunResult{Task: t}, err
		}
		if t.State != StateStopped {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return RunResult{Task: t, ExitCode: t.ExitCodes[essential], Output: t.Output}, nil
}
