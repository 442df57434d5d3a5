package dockerflock

import (
	"fmt"

	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

func (d *declarer) labels(role, agent string) docker.ContainerLabelArray {
	l := docker.ContainerLabelArray{
		docker.ContainerLabelArgs{Label: pulumi.String(protocol.LabelFlock), Value: pulumi.String(d.name)},
		docker.ContainerLabelArgs{Label: pulumi.String(protocol.LabelRole), Value: pulumi.String(role)},
	}
	if agent != "" {
		l = append(l, docker.ContainerLabelArgs{Label: pulumi.String(protocol.LabelAgent), Value: pulumi.String(agent)})
	}
	return l
}

func (d *declarer) netLabels(role, agent string) docker.NetworkLabelArray {
	var out docker.NetworkLabelArray
	for _, l := range d.labels(role, agent) {
		a := l.(docker.ContainerLabelArgs)
		out = append(out, docker.NetworkLabelArgs{Label: a.Label, Value: a.Value})
	}
	return out
}

// hardened returns container args with what every flock container shares:
// its own non-root UID, read-only root, small noexec tmpfs for /tmp and /run,
// no capabilities, no-new-privileges, CPU/memory/process limits, an init,
// a bounded restart policy (CIS 5.15) and bounded logs.
func hardened(l flock.Limits, uid int, runtimeName string) *docker.ContainerArgs {
	// Owned by the container's own UID, 0700. (A mode=1777 tmpfs comes back
	// root-owned 0755 after a container restart on Docker 20.10, which left a
	// restarted agent unable to write /run; uid/gid options survive restarts.)
	tmpfs := fmt.Sprintf("rw,noexec,nosuid,nodev,size=%dm,uid=%d,gid=%d,mode=0700", l.TmpfsMiB, uid, uid)
	args := &docker.ContainerArgs{
		User:         pulumi.String(fmt.Sprintf("%d:%d", uid, uid)),
		ReadOnly:     pulumi.Bool(true),
		Tmpfs:        pulumi.StringMap{"/tmp": pulumi.String(tmpfs), "/run": pulumi.String(tmpfs)},
		Capabilities: docker.ContainerCapabilitiesArgs{Drops: pulumi.StringArray{pulumi.String("ALL")}},
		SecurityOpts: pulumi.StringArray{pulumi.String("no-new-privileges:true")},
		Privileged:   pulumi.Bool(false),
		Memory:       pulumi.Int(l.MemoryMiB),                // MiB: the provider multiplies by 1024*1024
		MemorySwap:   pulumi.Int(l.MemoryMiB),                // = memory: no swap, and no perpetual diff
		Cpus:         pulumi.String(flock.CPUString(l.CPUs)), // the provider's own spelling: no churn
		CpuShares:    pulumi.Int(512),
		Ulimits: docker.ContainerUlimitArray{
			docker.ContainerUlimitArgs{Name: pulumi.String("nproc"), Soft: pulumi.Int(l.Pids), Hard: pulumi.Int(l.Pids)},
			docker.ContainerUlimitArgs{Name: pulumi.String("nofile"), Soft: pulumi.Int(1024), Hard: pulumi.Int(4096)},
			docker.ContainerUlimitArgs{Name: pulumi.String("core"), Soft: pulumi.Int(0), Hard: pulumi.Int(0)},
		},
		Init:          pulumi.Bool(true),
		Restart:       pulumi.String("on-failure"),
		MaxRetryCount: pulumi.Int(5),
		LogDriver:     pulumi.String("json-file"),
		LogOpts:       pulumi.StringMap{"max-size": pulumi.String("10m"), "max-file": pulumi.String("3")},
		StopSignal:    pulumi.String("SIGTERM"),
		StopTimeout:   pulumi.Int(30),
		// Stop gracefully on destroy too: the agent drains its task first.
		DestroyGraceSeconds: pulumi.Int(30),
		MustRun:             pulumi.Bool(true),
	}
	if runtimeName != "" {
		args.Runtime = pulumi.String(runtimeName)
	}
	return args
}

func healthcheck(binary string) docker.ContainerHealthcheckPtrInput {
	return docker.ContainerHealthcheckArgs{
		Tests:       pulumi.StringArray{pulumi.String("CMD"), pulumi.String(binary), pulumi.String("health")},
		Interval:    pulumi.String("10s"),
		Timeout:     pulumi.String("3s"),
		StartPeriod: pulumi.String("5s"),
		Retries:     pulumi.Int(3),
	}
}

func bindMount(source, target string, readOnly bool) docker.ContainerMountArgs {
	return docker.ContainerMountArgs{
		Type:        pulumi.String("bind"),
		Source:      pulumi.String(source),
		Target:      pulumi.String(target),
		ReadOnly:    pulumi.Bool(readOnly),
		BindOptions: docker.ContainerMountBindOptionsArgs{Propagation: pulumi.String("rprivate")},
	}
}

func loopbackPort(internal, external int) docker.ContainerPortArgs {
	return docker.ContainerPortArgs{Internal: pulumi.Int(internal), External: pulumi.Int(external), Ip: pulumi.String("127.0.0.1"), Protocol: pulumi.String("tcp")}
}
