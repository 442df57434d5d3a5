// A task's containers as Fargate runs them: their requests to the engine,
// started in their dependsOn order, their state.

package fargate

import (
	"context"
	"fmt"
	"time"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

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
	out := containerStatus{Status: replay.Str(st["Status"]), Running: st["Running"] == true, ExitCode: num(st["ExitCode"])}
	if h, ok := st["Health"].(map[string]any); ok {
		out.Health = replay.Str(h["Status"])
	}
	return out, nil
}
