package fargate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/fargate"
)

// The replay's own Fargate semantics, on task definitions of the test's
// (the agent image, whose only binary is /flock-agent): what the flock's
// task definitions do not exercise, or not on purpose.

// agentImage is the image reference the flock's agents run.
func agentImage(t *testing.T) string {
	t.Helper()
	for _, td := range cluster.Model().TaskDefs {
		if strings.HasSuffix(td.Family, "-agent-1") {
			return td.Containers[0].Image
		}
	}
	t.Fatal("no agent-1 task definition")
	return ""
}

func yes() *bool { v := true; return &v }
func no() *bool  { v := false; return &v }

// taskDef is a one-off task definition: 0.25 vCPU, 512 MiB, the given
// containers (user 12345 unless set), the given bind volumes.
func taskDef(t *testing.T, family string, volumes []string, cs ...fargate.Container) *fargate.TaskDef {
	td := &fargate.TaskDef{ARN: "arn:aws:ecs:test:task-definition/" + family + ":1", Family: family, CPU: 256, MemoryMiB: 512, Arch: "X86_64", Volumes: map[string]fargate.Volume{}}
	for _, v := range volumes {
		td.Volumes[v] = fargate.Volume{Name: v}
	}
	for _, c := range cs {
		if c.Image == "" {
			c.Image = agentImage(t)
		}
		if c.User == "" {
			c.User = "12345:12345"
		}
		c.ReadonlyRootFilesystem = true
		c.LinuxParameters = &fargate.LinuxParameters{Capabilities: &fargate.Capabilities{Drop: []string{"ALL"}}, InitProcessEnabled: true}
		td.Containers = append(td.Containers, c)
	}
	return td
}

func runDef(t *testing.T, td *fargate.TaskDef) fargate.RunResult {
	t.Helper()
	res, err := cluster.RunTaskDef(context.Background(), td, operator, nil, 2*time.Minute)
	if err != nil {
		t.Fatalf("run %s: %v", td.Family, err)
	}
	return res
}

// A task volume at a path the image declares as a VOLUME (the agent image's
// /run, mode 1777) starts with the image's directory: a UID that is not the
// image's writes there. Any other starts empty, root-owned, 0755: the same
// UID cannot write there.
func TestFargateTaskVolumes(t *testing.T) {
	need(t)
	write := func(path string) fargate.Container {
		return fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "write", path, "x"},
			MountPoints: []fargate.MountPoint{{SourceVolume: "run", ContainerPath: "/run"}, {SourceVolume: "scratch", ContainerPath: "/scratch"}}}
	}
	if res := runDef(t, taskDef(t, "volumes-declared", []string{"run", "scratch"}, write("/run/x"))); res.ExitCode != 0 {
		t.Errorf("writing the declared volume /run as UID 12345: exit %d: %s", res.ExitCode, res.Output)
	}
	res := runDef(t, taskDef(t, "volumes-plain", []string{"run", "scratch"}, write("/scratch/x")))
	if res.ExitCode == 0 || !strings.Contains(res.Output, "permission denied") {
		t.Errorf("writing the undeclared volume /scratch as UID 12345: exit %d: %s; want permission denied (root-owned, 0755)", res.ExitCode, res.Output)
	}
}

// A secret the task definition names that Secrets Manager does not have
// stops the task before any container starts, with ECS's reason.
func TestFargateMissingSecretStopsTheTask(t *testing.T) {
	need(t)
	td := taskDef(t, "missing-secret", nil, fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "echo", "started"},
		Secrets: []fargate.SecretRef{{Name: "X", ValueFrom: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nosuch-AbCdEf"}}})
	res := runDef(t, td)
	if !strings.HasPrefix(res.Task.StopReason, "ResourceInitializationError: unable to pull secrets") || res.Task.Running != (time.Time{}) || strings.Contains(res.Output, "started") {
		t.Errorf("a missing secret: %q (running at %v, output %q); want ResourceInitializationError before any container ran", res.Task.StopReason, res.Task.Running, res.Output)
	}
}

// dependsOn inside a task: a container that needs another's SUCCESS starts
// after it exited 0, and a task whose dependency fails stops; an essential
// container that exits stops its task, the others with it.
func TestFargateDependsOnAndEssential(t *testing.T) {
	need(t)
	ok := taskDef(t, "depends-success", nil,
		fargate.Container{Name: "setup", Essential: no(), Command: []string{"tool", "exit", "0"}},
		fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "echo", "after setup"},
			DependsOn: []fargate.Dependency{{ContainerName: "setup", Condition: "SUCCESS"}}})
	if res := runDef(t, ok); res.ExitCode != 0 || !strings.Contains(res.Output, "after setup") || res.Task.ExitCodes["setup"] != 0 {
		t.Errorf("setup then main: %+v %q (%s)", res.Task.ExitCodes, res.Output, res.Task.StopReason)
	}
	bad := taskDef(t, "depends-failure", nil,
		fargate.Container{Name: "setup", Essential: no(), Command: []string{"tool", "exit", "3"}},
		fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "echo", "never"},
			DependsOn: []fargate.Dependency{{ContainerName: "setup", Condition: "SUCCESS"}}})
	if res := runDef(t, bad); !strings.HasPrefix(res.Task.StopReason, "DependencyConditionFailed") || strings.Contains(res.Output, "never") {
		t.Errorf("a failed setup: %q, output %q; want the task stopped before main ran", res.Task.StopReason, res.Output)
	}
	// The sidecar would sleep for an hour: the essential container's exit
	// stops it.
	start := time.Now()
	sidecar := taskDef(t, "essential-exit", nil,
		fargate.Container{Name: "sidecar", Essential: no(), Command: []string{"tool", "sleep", "1h"}, StopTimeout: 2},
		fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "exit", "4"}})
	res := runDef(t, sidecar)
	if res.ExitCode != 4 || !strings.HasPrefix(res.Task.StopReason, "Essential container in task exited") || time.Since(start) > time.Minute {
		t.Errorf("an essential container exiting: exit %d, %q after %s", res.ExitCode, res.Task.StopReason, time.Since(start))
	}
	if _, ok := res.Task.ExitCodes["sidecar"]; !ok {
		t.Errorf("the sidecar was not stopped with its task: %+v", res.Task.ExitCodes)
	}
}

// Task definitions that ECS refuses on Fargate are refused when the replay
// registers them: tmpfs, an added capability other than SYS_PTRACE, a
// health check interval below 5 s.
func TestFargateRefusesWhatFargateRefuses(t *testing.T) {
	need(t)
	for name, mod := range map[string]func(*fargate.Container){
		"tmpfs": func(c *fargate.Container) {
			c.LinuxParameters.Tmpfs = append(c.LinuxParameters.Tmpfs, []byte(`{"containerPath":"/tmp","size":16}`))
		},
		"NET_ADMIN": func(c *fargate.Container) { c.LinuxParameters.Capabilities.Add = []string{"NET_ADMIN"} },
		"interval 2 s": func(c *fargate.Container) {
			c.HealthCheck = &fargate.HealthCheck{Command: []string{"CMD", "/flock-agent", "health"}, Interval: 2}
		},
	} {
		td := taskDef(t, "refused", nil, fargate.Container{Name: "main", Essential: yes(), Command: []string{"tool", "echo", "x"}})
		mod(&td.Containers[0])
		if _, err := cluster.RunTaskDef(context.Background(), td, operator, nil, time.Minute); err == nil {
			t.Errorf("%s: the replay ran a task definition Fargate refuses", name)
		}
	}
}
