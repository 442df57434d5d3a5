package fargate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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

// containerRequest is the Engine API create request of one container as
// Fargate runs it: in the task's network namespace and cgroup.
func (c *Cluster) containerRequest(t *Task, ctr Container, env []string, mounts []map[string]any) (map[string]any, error) {
	image, ok := c.images[ctr.Image]
	if !ok {
		return nil, fmt.Errorf("image %q was not built by the replay", ctr.Image)
	}
	cfg := map[string]any{
		"Image": image, "User": ctr.User, "Env": env, "WorkingDir": ctr.WorkingDirectory,
		"Labels": labels(t, map[string]string{"ai-flock.fargate.container": ctr.Name}),
	}
	for k, v := range ctr.DockerLabels {
		cfg["Labels"].(map[string]string)[k] = v
	}
	if cmd := t.overrides[ctr.Name]; cmd != nil {
		cfg["Cmd"] = cmd
	} else if len(ctr.Command) > 0 {
		cfg["Cmd"] = ctr.Command
	}
	if len(ctr.EntryPoint) > 0 {
		cfg["Entrypoint"] = ctr.EntryPoint
	}
	if h := ctr.HealthCheck; h != nil {
		// ECS's defaults: interval 30 s, timeout 5 s, retries 3, start 0.
		sec := func(v, def int) int64 {
			if v == 0 {
				v = def
			}
			return int64(time.Duration(v) * time.Second)
		}
		retries := h.Retries
		if retries == 0 {
			retries = 3
		}
		cfg["Healthcheck"] = map[string]any{"Test": h.Command, "Interval": sec(h.Interval, 30), "Timeout": sec(h.Timeout, 5),
			"Retries": retries, "StartPeriod": sec(h.StartPeriod, 0)}
	} else {
		// ECS runs no health check but the task definition's: an image's
		// own HEALTHCHECK is not Fargate's.
		cfg["Healthcheck"] = map[string]any{"Test": []string{"NONE"}}
	}
	host := map[string]any{
		"NetworkMode":    "container:" + t.pause,
		"ReadonlyRootfs": ctr.ReadonlyRootFilesystem,
		"CgroupParent":   cgroupParent(t.ID),
		"Mounts":         mounts,
		"RestartPolicy":  map[string]any{"Name": "no"},
		// awslogs is not reproduced: the engine keeps the output, bounded.
		"LogConfig": map[string]any{"Type": "json-file", "Config": map[string]string{"max-size": "10m", "max-file": "2"}},
	}
	if ctr.Memory > 0 {
		host["Memory"] = int64(ctr.Memory) << 20
		host["MemorySwap"] = int64(ctr.Memory) << 20 // Fargate has no swap
	}
	if ctr.MemoryReservation > 0 {
		host["MemoryReservation"] = int64(ctr.MemoryReservation) << 20
	}
	if ctr.CPU > 0 {
		host["CpuShares"] = max(ctr.CPU, 2) // ECS gives a container its CPU units as shares
	}
	if lp := ctr.LinuxParameters; lp != nil {
		host["Init"] = lp.InitProcessEnabled
		if lp.Capabilities != nil {
			host["CapAdd"], host["CapDrop"] = lp.Capabilities.Add, lp.Capabilities.Drop
		}
		if lp.SharedMemorySize > 0 {
			return nil, fmt.Errorf("linuxParameters.sharedMemorySize is not supported on Fargate")
		}
	}
	var ulimits []map[string]any
	for _, u := range ctr.Ulimits {
		ulimits = append(ulimits, map[string]any{"Name": u.Name, "Soft": u.SoftLimit, "Hard": u.HardLimit})
	}
	host["Ulimits"] = ulimits
	if ctr.StopTimeout > 0 {
		cfg["StopTimeout"] = ctr.StopTimeout
	}
	cfg["HostConfig"] = host
	return cfg, nil
}

func labels(t *Task, extra map[string]string) map[string]string {
	l := map[string]string{Label: "1", replay.RunLabel: "1", "ai-flock.fargate.task": t.ID, "ai-flock.fargate.family": t.Def.Family}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// startContainers starts the containers as their dependsOn conditions
// allow (START, COMPLETE, SUCCESS, HEALTHY), the ones without first. A
// condition that can no longer be met stops the task.
func (c *Cluster) startContainers(ctx context.Context, t *Task) (reason string, err error) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		pending := 0
		for _, ctr := range t.Def.Containers {
			if t.started[ctr.Name] {
				continue
			}
			pending++
			ok, why, err := c.dependenciesMet(ctx, t, ctr)
			if err != nil {
				return "", err
			}
			if why != "" {
				return why, nil
			}
			if !ok {
				continue
			}
			if err := c.e.Start(ctx, t.containers[ctr.Name]); err != nil {
				return "", fmt.Errorf("task %s: start %s: %w", t.Def.Family, ctr.Name, err)
			}
			t.started[ctr.Name] = true
			pending--
		}
		if pending == 0 {
			return "", nil
		}
		if time.Now().After(deadline) {
			return "DependsOn: a container's conditions were not met in 10 minutes", nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// dependenciesMet reports whether ctr's dependsOn conditions hold now; why
// says why one never can.
func (c *Cluster) dependenciesMet(ctx context.Context, t *Task, ctr Container) (ok bool, why string, err error) {
	for _, d := range ctr.DependsOn {
		if !t.started[d.ContainerName] {
			return false, "", nil
		}
		st, err := c.containerState(ctx, t.containers[d.ContainerName])
		if err != nil {
			return false, "", err
		}
		switch d.Condition {
		case "START":
		case "COMPLETE":
			if st.Running {
				return false, "", nil
			}
		case "SUCCESS":
			if st.Running {
				return false, "", nil
			}
			if st.ExitCode != 0 {
				return false, fmt.Sprintf("DependencyConditionFailed: container %s exited %d, and %s needs it to succeed", d.ContainerName, st.ExitCode, ctr.Name), nil
			}
		case "HEALTHY":
			if st.Health == "unhealthy" {
				return false, fmt.Sprintf("DependencyConditionFailed: container %s is unhealthy, and %s needs it healthy", d.ContainerName, ctr.Name), nil
			}
			if !st.Running && st.Status == "exited" {
				return false, fmt.Sprintf("DependencyConditionFailed: container %s exited, and %s needs it healthy", d.ContainerName, ctr.Name), nil
			}
			if st.Health != "healthy" {
				return false, "", nil
			}
		}
	}
	return true, "", nil
}

// containerStatus is what the engine says of a container.
type containerStatus struct {
	Status   string // created, running, exited, ...
	Running  bool
	ExitCode int
	Health   string // starting, healthy, unhealthy, "" without a check
}

func (c *Cluster) containerState(ctx context.Context, id string) (containerStatus, error) {
	doc, err := c.e.Inspect(ctx, id)
	if err != nil {
		return containerStatus{}, err
	}
	st, _ := doc["State"].(map[string]any)
	out := containerStatus{Status: str(st["Status"]), Running: st["Running"] == true, ExitCode: num(st["ExitCode"])}
	if h, ok := st["Health"].(map[string]any); ok {
		out.Health = str(h["Status"])
	}
	return out, nil
}

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
