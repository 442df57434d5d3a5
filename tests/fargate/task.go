package fargate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// Task states (ECS's lastStatus) and health statuses.
const (
	StateProvisioning = "PROVISIONING"
	StateRunning      = "RUNNING"
	StateStopped      = "STOPPED"

	HealthUnknown   = "UNKNOWN"
	HealthHealthy   = "HEALTHY"
	HealthUnhealthy = "UNHEALTHY"
)

// Task is one replayed Fargate task.
type Task struct {
	ID      string
	Def     *TaskDef
	Service string // its service's ECS name ("" for a task run on its own)
	At      Endpoint
	// Registry is the Cloud Map name it registers under while healthy.
	Registry string

	State, Health string
	StopReason    string
	Started       time.Time // when it was asked for
	Running       time.Time // when it reached RUNNING
	Healthy       time.Time // when it was first HEALTHY
	Stopped       time.Time
	// ExitCodes are its containers' exit codes once they exited.
	ExitCodes map[string]int
	// Logs are its essential containers' last lines, kept when it stops;
	// Output its first essential container's whole output.
	Logs, Output string

	pause      string            // the container holding its network namespace
	network    string            // its own network (the one clients' servers join)
	Addr       netip.Addr        // its address there
	containers map[string]string // container name -> ID
	started    map[string]bool   // containers started
	registered bool
	joined     []string // networks of other tasks its pause container joined
	dns        *dnsRecorder
	overrides  map[string][]string
}

func (t *Task) hasHealthCheck() bool {
	return slices.ContainsFunc(t.Def.Containers, func(c Container) bool { return c.IsEssential() && c.HealthCheck != nil })
}

// Container is the engine's ID of the task's container name ("" if none).
func (t *Task) Container(name string) string { return t.containers[name] }

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fail stops a task before any of its containers started, as ECS does when
// it cannot provision it (the reasons are ECS's own wording).
func (c *Cluster) fail(ctx context.Context, t *Task, reason string) *Task {
	c.opt.Log("task %s (%s) stopped before it started: %s", t.ID, t.Def.Family, reason)
	_ = c.stopTask(ctx, t, reason)
	return t
}

// startTask runs a task of td in groups and subnet as Fargate would, up to
// RUNNING: a task that cannot start is returned STOPPED with ECS's reason;
// an error means the replay itself cannot run it.
func (c *Cluster) startTask(ctx context.Context, td *TaskDef, at Endpoint, service, registry string, overrides map[string][]string) (*Task, error) {
	t := &Task{ID: newID(), Def: td, Service: service, At: at, Registry: registry, State: StateProvisioning, Health: HealthUnknown,
		Started: time.Now(), ExitCodes: map[string]int{}, containers: map[string]string{}, started: map[string]bool{}, overrides: overrides}
	c.mu.Lock()
	c.tasks[t.ID] = t
	c.mu.Unlock()

	// Secrets and the image come through the AWS APIs: without a way to
	// them the task stops before it starts.
	env, missing := c.environment(td)
	if missing != "" {
		return c.fail(ctx, t, "ResourceInitializationError: unable to pull secrets or registry auth: execution resource retrieval failed: unable to retrieve secret from asm: service call has been retried 1 time(s): failed to fetch secret "+missing+" from secrets manager: ResourceNotFoundException: Secrets Manager can't find the specified secret."), nil
	}
	if !c.m.ReachesAWS(at) {
		return c.fail(ctx, t, "CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref: dial tcp: i/o timeout (no route to ECR: neither the interface endpoints nor a route out admit the task's security groups)"), nil
	}
	mounts, reason, err := c.volumes(ctx, t)
	if err != nil {
		_ = c.stopTask(ctx, t, "replay error")
		return nil, err
	}
	if reason != "" {
		return c.fail(ctx, t, reason), nil
	}
	if err := makeCgroup(t.ID, td.CPU, td.MemoryMiB); err != nil {
		_ = c.stopTask(ctx, t, "replay error")
		return nil, err
	}
	if err := c.network(ctx, t); err != nil {
		_ = c.stopTask(ctx, t, "replay error")
		return nil, fmt.Errorf("task %s network: %w", td.Family, err)
	}
	for _, ctr := range td.Containers {
		req, err := c.containerRequest(t, ctr, env[ctr.Name], mounts[ctr.Name])
		if err == nil {
			var id string
			if id, err = c.e.CreateContainer(ctx, "fargate-"+t.ID+"-"+ctr.Name, req); err == nil {
				t.containers[ctr.Name] = id
			}
		}
		if err != nil {
			_ = c.stopTask(ctx, t, "replay error")
			return nil, fmt.Errorf("task %s container %s: %w", td.Family, ctr.Name, err)
		}
	}
	if reason, err := c.startContainers(ctx, t); err != nil {
		_ = c.stopTask(ctx, t, "replay error")
		return nil, err
	} else if reason != "" {
		return c.fail(ctx, t, reason), nil
	}
	c.mu.Lock()
	t.State, t.Running = StateRunning, time.Now()
	c.mu.Unlock()
	c.opt.Log("task %s (%s) RUNNING at %s after %s", t.ID, td.Family, t.Addr, time.Since(t.Started).Round(time.Millisecond))
	return t, nil
}

// environment is each container's environment: its variables and its
// secrets, resolved; missing names the first secret that does not exist.
func (c *Cluster) environment(td *TaskDef) (env map[string][]string, missing string) {
	env = map[string][]string{}
	for _, ctr := range td.Containers {
		var kv []string
		for _, e := range ctr.Environment {
			kv = append(kv, e.Name+"="+e.Value)
		}
		for _, s := range ctr.Secrets {
			v, ok := c.m.Secrets[s.ValueFrom]
			if !ok {
				return nil, s.ValueFrom
			}
			kv = append(kv, s.Name+"="+v)
		}
		env[ctr.Name] = kv
	}
	return env, ""
}

func labels(t *Task, extra map[string]string) map[string]string {
	l := map[string]string{Label: "1", replay.RunLabel: "1", "ai-flock.fargate.task": t.ID, "ai-flock.fargate.family": t.Def.Family}
	for k, v := range extra {
		l[k] = v
	}
	return l
}
