// A task's life after its start: observed (health, exits) and stopped.

package fargate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// observe brings a running task's state up to date: an essential container
// that exited stops the task; the task's health is its essential
// containers' (UNHEALTHY if one is); once HEALTHY it registers in Cloud Map.
func (c *Cluster) observe(ctx context.Context, t *Task) error {
	if t.State != StateRunning {
		return nil
	}
	health := HealthHealthy
	checked := false
	for _, ctr := range t.Def.Containers {
		st, err := c.containerState(ctx, t.containers[ctr.Name])
		if err != nil {
			return err
		}
		if !st.Running && t.started[ctr.Name] {
			c.mu.Lock()
			t.ExitCodes[ctr.Name] = st.ExitCode
			c.mu.Unlock()
			if ctr.IsEssential() {
				return c.stopTask(ctx, t, fmt.Sprintf("Essential container in task exited (%s: exit code %d)", ctr.Name, st.ExitCode))
			}
		}
		if !ctr.IsEssential() || ctr.HealthCheck == nil {
			continue
		}
		checked = true
		switch st.Health {
		case "unhealthy":
			health = HealthUnhealthy
		case "healthy":
		default:
			if health != HealthUnhealthy {
				health = HealthUnknown
			}
		}
	}
	if !checked {
		health = HealthUnknown
	}
	c.mu.Lock()
	t.Health = health
	if health == HealthHealthy && t.Healthy.IsZero() {
		t.Healthy = time.Now()
		c.opt.Log("task %s (%s) HEALTHY after %s", t.ID, t.Def.Family, time.Since(t.Started).Round(time.Millisecond))
	}
	register := health == HealthHealthy && t.Registry != "" && !t.registered
	c.mu.Unlock()
	if register {
		return c.register(ctx, t)
	}
	return nil
}

// stopTask stops a task's containers (each with its stopTimeout: SIGTERM,
// then SIGKILL), keeps its exit codes and its essential containers' last
// log lines, and removes it from the engine: its containers, its network,
// its place in other tasks' networks, its cgroup and its own storage.
func (c *Cluster) stopTask(ctx context.Context, t *Task, reason string) error {
	c.mu.Lock()
	if t.State == StateStopped && t.pause == "" && len(t.containers) == 0 {
		c.mu.Unlock()
		return nil
	}
	if t.State != StateStopped {
		t.State, t.StopReason, t.Stopped = StateStopped, reason, time.Now()
	}
	c.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	var errs []error
	var logs strings.Builder
	for _, ctr := range t.Def.Containers {
		id := t.containers[ctr.Name]
		if id == "" {
			continue
		}
		timeout := ctr.StopTimeout
		if timeout == 0 {
			timeout = 30 // ECS's default
		}
		if err := c.e.Stop(ctx, id, timeout); err != nil && !replay.IsNotFound(err) && !strings.Contains(err.Error(), "304") {
			errs = append(errs, err)
		}
		if st, err := c.containerState(ctx, id); err == nil && t.started[ctr.Name] {
			c.mu.Lock()
			if _, ok := t.ExitCodes[ctr.Name]; !ok {
				t.ExitCodes[ctr.Name] = st.ExitCode
			}
			c.mu.Unlock()
		}
		if ctr.IsEssential() {
			if l, err := c.e.Logs(ctx, id, 0); err == nil {
				if t.Output == "" {
					t.Output = l
				}
				if lines := strings.Split(strings.TrimRight(l, "\n"), "\n"); len(lines) > 40 {
					l = strings.Join(lines[len(lines)-40:], "\n") + "\n"
				}
				fmt.Fprintf(&logs, "== %s\n%s", ctr.Name, l)
			}
		}
	}
	c.mu.Lock()
	t.Logs = logs.String()
	c.mu.Unlock()
	for name, id := range t.containers {
		if err := c.e.Remove(ctx, id); err != nil && !replay.IsNotFound(err) {
			errs = append(errs, err)
		}
		delete(t.containers, name)
	}
	t.dns.close()
	t.dns = nil
	if err := c.unnetwork(ctx, t); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(t.ID); err != nil {
		errs = append(errs, err)
	}
	if err := c.removeTaskStorage(t); err != nil {
		errs = append(errs, err)
	}
	c.mu.Lock()
	delete(c.tasks, t.ID)
	c.mu.Unlock()
	c.opt.Log("task %s (%s) STOPPED: %s", t.ID, t.Def.Family, reason)
	return errors.Join(errs...)
}
