package fargate

import (
	"context"
	"fmt"
	"time"
)

// serviceRun is a service's scheduler: it keeps its one task running,
// replacing a task that stopped or that ECS would call unhealthy (an
// unhealthy essential container), with ECS's backoff between launches
// that keep failing.
type serviceRun struct {
	c       *Cluster
	svc     *Service
	td      *TaskDef
	task    *Task   // current (nil before the first)
	history []*Task // every task it ran, oldest first
	fatal   error   // the replay cannot run it (not a task failure)
	steady  chan struct{}
}

// ReplacementBackoff is how long the scheduler waits before launching again
// after a task that never became healthy stopped (doubling, at most
// MaxReplacementBackoff): ECS throttles a service whose tasks keep failing.
var (
	ReplacementBackoff    = 2 * time.Second
	MaxReplacementBackoff = 30 * time.Second
)

func (c *Cluster) startService(ctx context.Context, s *Service) *serviceRun {
	sr := &serviceRun{c: c, svc: s, td: c.m.TaskDefs[s.TaskDef], steady: make(chan struct{})}
	c.mu.Lock()
	c.services[s.Resource] = sr
	c.order = append(c.order, s.Resource)
	c.mu.Unlock()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); sr.loop(ctx) }()
	return sr
}

func (sr *serviceRun) endpoint() Endpoint {
	at := Endpoint{Groups: sr.svc.Groups}
	if len(sr.svc.Subnets) > 0 {
		at.Subnet = sr.svc.Subnets[0]
	}
	return at
}

func (sr *serviceRun) loop(ctx context.Context) {
	c := sr.c
	backoff := time.Duration(0)
	steady := false
	for ctx.Err() == nil {
		c.mu.Lock()
		cur := sr.task
		c.mu.Unlock()
		switch {
		case cur == nil || cur.State == StateStopped:
			if cur != nil {
				if cur.Healthy.IsZero() {
					backoff = min(max(2*backoff, ReplacementBackoff), MaxReplacementBackoff)
				} else {
					backoff = 0
				}
				c.opt.Log("service %s: task %s stopped (%s); launching another in %s", sr.svc.Name, cur.ID, cur.StopReason, backoff)
				if !sleep(ctx, backoff) {
					return
				}
			}
			t, err := c.startTask(ctx, sr.td, sr.endpoint(), sr.svc.Name, sr.svc.Registry, nil)
			c.mu.Lock()
			if err != nil {
				sr.fatal = err
				c.mu.Unlock()
				c.opt.Log("service %s: %v", sr.svc.Name, err)
				return
			}
			sr.task = t
			sr.history = append(sr.history, t)
			c.mu.Unlock()
		default:
			if err := c.observe(ctx, cur); err != nil && ctx.Err() == nil {
				c.opt.Log("service %s: task %s: %v", sr.svc.Name, cur.ID, err)
			}
			if cur.State == StateRunning && cur.Health == HealthUnhealthy {
				_ = c.stopTask(ctx, cur, "Task failed container health checks")
			}
		}
		// Steady as the provider's waiter sees it: the desired count of
		// tasks RUNNING (health is not part of it).
		if !steady && sr.task != nil && sr.task.State == StateRunning {
			steady = true
			close(sr.steady)
		}
		if !sleep(ctx, c.opt.Poll) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// waitSteady waits until the service first reaches its steady state.
func (sr *serviceRun) waitSteady(ctx context.Context) error {
	deadline := time.After(10 * time.Minute)
	for {
		select {
		case <-sr.steady:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("not steady after 10 minutes: %s", sr.describe())
		case <-time.After(time.Second):
			sr.c.mu.Lock()
			err := sr.fatal
			sr.c.mu.Unlock()
			if err != nil {
				return err
			}
		}
	}
}

// describe says what the service is doing (c.mu held or not needed).
func (sr *serviceRun) describe() string {
	t := sr.task
	if t == nil {
		return sr.svc.Name + ": no task yet"
	}
	s := fmt.Sprintf("%s: task %s %s %s (%d launched)", sr.svc.Name, t.ID, t.State, t.Health, len(sr.history))
	if t.StopReason != "" {
		s += ": " + t.StopReason
	}
	for i := len(sr.history) - 1; i >= 0; i-- {
		if h := sr.history[i]; h.StopReason != "" {
			s += fmt.Sprintf("; last stop: %s", h.StopReason)
			if h.Logs != "" {
				s += "\n" + h.Logs
			}
			break
		}
	}
	return s
}
