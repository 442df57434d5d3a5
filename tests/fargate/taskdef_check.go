package fargate

import (
	"fmt"
	"slices"
	"strings"
)

// check holds a task definition to what ECS and Fargate accept when it is
// registered or run: what the replay would otherwise run differently.
func (td *TaskDef) check() error {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	names := map[string]bool{}
	for _, c := range td.Containers {
		names[c.Name] = true
	}
	essential := 0
	for _, c := range td.Containers {
		if c.IsEssential() {
			essential++
		}
		if lp := c.LinuxParameters; lp != nil {
			if len(lp.Tmpfs) > 0 {
				bad("container %s: linuxParameters.tmpfs is not supported on Fargate", c.Name)
			}
			if len(lp.Devices) > 0 {
				bad("container %s: linuxParameters.devices is not supported on Fargate", c.Name)
			}
			if lp.Capabilities != nil {
				for _, a := range lp.Capabilities.Add {
					if a != "SYS_PTRACE" {
						bad("container %s: Fargate can add only SYS_PTRACE, not %s", c.Name, a)
					}
				}
			}
		}
		if len(c.VolumesFrom) > 0 || len(c.SystemControls) > 0 {
			bad("container %s: volumesFrom and systemControls are not mapped by the Fargate replay", c.Name)
		}
		for _, mp := range c.MountPoints {
			if _, ok := td.Volumes[mp.SourceVolume]; !ok {
				bad("container %s: mount point %s names no volume of the task", c.Name, mp.SourceVolume)
			}
		}
		for _, d := range c.DependsOn {
			if !names[d.ContainerName] || d.ContainerName == c.Name {
				bad("container %s: dependsOn %s is not another container of the task", c.Name, d.ContainerName)
			}
			if !slices.Contains([]string{"START", "COMPLETE", "SUCCESS", "HEALTHY"}, d.Condition) {
				bad("container %s: dependsOn condition %q", c.Name, d.Condition)
			}
		}
		if h := c.HealthCheck; h != nil {
			// ECS's ranges (RegisterTaskDefinition, HealthCheck).
			if h.Interval != 0 && (h.Interval < 5 || h.Interval > 300) || h.Timeout != 0 && (h.Timeout < 2 || h.Timeout > 60) ||
				h.Retries != 0 && (h.Retries < 1 || h.Retries > 10) || h.StartPeriod < 0 || h.StartPeriod > 300 {
				bad("container %s: health check %+v outside ECS's ranges (interval 5-300, timeout 2-60, retries 1-10, startPeriod 0-300)", c.Name, *h)
			}
			if len(h.Command) == 0 || (h.Command[0] != "CMD" && h.Command[0] != "CMD-SHELL") {
				bad("container %s: health check command %q must start with CMD or CMD-SHELL", c.Name, h.Command)
			}
		}
	}
	if essential == 0 {
		bad("no essential container")
	}
	for _, v := range td.Volumes {
		// ECS: an EFS volume with an access point or IAM authorization
		// requires transit encryption.
		if e := v.EFS; e != nil && (e.AccessPointID != "" || e.IAM == "ENABLED") && e.TransitEncryption != "ENABLED" {
			bad("volume %s: an access point or IAM authorization requires transitEncryption ENABLED", v.Name)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
