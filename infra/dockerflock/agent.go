package dockerflock

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi-command/sdk/go/command/local"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// pidsLimit sets a container's cgroup PIDs limit through the Engine API
// (pulumi-docker has no pids_limit), again whenever the container is
// replaced. The nproc ulimit (per UID, and every container has its own UID)
// holds in the moment between creation and this step. For the flock's own
// services; an agent's is set by its first bus link (busLinks).
func (d *declarer) pidsLimit(name string, c *docker.Container, pids int) error {
	_, err := local.NewCommand(d.ctx, d.n(name, "pids-limit"), &local.CommandArgs{
		Create:      pulumi.String(pidsLimitCommand(pids, d.n(name))),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
		Triggers:    pulumi.Array{c.ID(), pulumi.Int(pids)},
	}, d.parent)
	return err
}

// pidsLimitCommand sets container's cgroup PIDs limit (what the policy pack's
// stack-pids-limit-step looks for).
func pidsLimitCommand(pids int, container string) string {
	return fmt.Sprintf("docker update --pids-limit %d %s >/dev/null", pids, container)
}

func (d *declarer) declareAgent(a flock.Agent) error {
	seed, ok := d.args.Seeds[a.ID]
	if !ok {
		return fmt.Errorf("no credentials")
	}
	prepare, err := local.NewCommand(d.ctx, d.n(a.ID, "prepare"), &local.CommandArgs{
		Create: pulumi.String(d.args.Host.ShellCommand()),
		// The script carries the agent's seed: it is a secret, passed on stdin.
		Stdin: pulumi.ToSecret(pulumi.String(AgentScript(d.m, a, seed))).(pulumi.StringOutput),
		// Removing the agent or destroying the flock takes its key off the host.
		Delete: pulumi.String(d.args.Host.RootCommand(AgentCleanupScript(d.m, a))),
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{d.layout}))
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}

	netName := d.n(a.ID, "net")
	network, err := docker.NewNetwork(d.ctx, netName, &docker.NetworkArgs{
		Name:     pulumi.String(netName),
		Driver:   pulumi.String("bridge"),
		Internal: pulumi.Bool(true),
		IpamConfigs: docker.NetworkIpamConfigArray{docker.NetworkIpamConfigArgs{
			Subnet: pulumi.String(a.Subnet.String()), Gateway: pulumi.String(a.Subnet.Addr().Next().String()),
		}},
		Options: pulumi.StringMap{
			// internal removes the route out; inhibit_ipv4 also keeps the
			// gateway address off the host's bridge, so the agent cannot reach
			// the host (the VM) through it. Only the agent and the bus are here.
			"com.docker.network.bridge.inhibit_ipv4": pulumi.String("true"),
		},
		Labels: d.netLabels("agent", a.ID),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}

	// The gateway joins by a step of the agent's own, so adding an agent
	// never replaces it; nothing in the agent waits for it.
	if d.gateway != nil {
		if _, err := d.gatewayLink(a, netName, network); err != nil {
			return fmt.Errorf("gateway link: %w", err)
		}
	}

	args := hardened(a.Limits, a.UID, d.m.Runtime)
	args.Name = pulumi.String(d.n(a.ID))
	args.Hostname = pulumi.String(a.ID)
	args.Image = d.agentImage.RepoDigest
	if own := d.ownImages[a.Image.Key()]; own != nil {
		args.Image = own.RepoDigest
	}
	envs := pulumi.StringArray{
		pulumi.String(protocol.EnvAgentID + "=" + a.ID),
		// The bus by address, not by name: reconnecting never waits on DNS
		// (the name vanishes while the bus is down, and lookups then stall).
		pulumi.String(protocol.EnvNATSURL + "=" + AgentNATSURL(d.m, a)),
		pulumi.String(protocol.EnvSharedDir + "=" + protocol.ContainerSharedDir),
		pulumi.String(protocol.EnvNkeyFile + "=" + protocol.ContainerCredsFile),
		pulumi.String(protocol.EnvHeartbeat + "=" + d.m.Bus.Heartbeat.String()),
		pulumi.String(protocol.EnvTaskTimeout + "=" + a.Limits.TaskTimeout.String()),
		pulumi.String(protocol.EnvConcurrency + "=" + strconv.Itoa(a.Limits.Concurrency)),
	}
	if a.Program != "" {
		envs = append(envs, pulumi.String(protocol.EnvProgram+"="+a.Program))
	}
	if !a.Image.Stock() {
		// The user's image may hold programs that want a home (caches,
		// config): the agent's own directory, the one place it may write.
		envs = append(envs, pulumi.String("HOME="+protocol.ContainerAgentDir(a.ID)))
	}
	for _, e := range AgentGatewayEnv(d.m, a, d.args.EgressCA) {
		envs = append(envs, pulumi.String(e))
	}
	args.Envs = envs
	args.Mounts = docker.ContainerMountArray{
		bindMount(d.m.Shared.AgentDir(a.ID), protocol.ContainerAgentDir(a.ID), false),
		bindMount(d.m.Shared.CommonDir(), protocol.ContainerCommonDir(), true),
		bindMount(d.m.Shared.LogFile(a.ID), protocol.ContainerLogFile(a.ID), false),
		bindMount(d.m.Shared.CredsDir(a.ID), protocol.ContainerCredsDir, true),
	}
	// A fixed address after the bus nodes': the engine never hands the agent
	// one a node must take, so the container need not wait for its links.
	args.NetworksAdvanced = docker.ContainerNetworksAdvancedArray{docker.ContainerNetworksAdvancedArgs{
		Name: network.Name, Ipv4Address: pulumi.String(AgentAddress(d.m, a).String()),
	}}
	// Docker's embedded resolver forwards names it does not know to upstream
	// servers: a side channel out of an internal network. With loopback as
	// the only upstream it answers for the flock's own names and nothing else.
	args.Dns = pulumi.StringArray{pulumi.String("127.0.0.1")}
	args.Healthcheck = healthcheck("/flock-agent")
	// The directory's filesystem size: a new one (or the first, for a flock
	// made before quotas) recreates the container, so it mounts what the
	// prepare step mounted rather than the directory it replaced.
	args.Labels = append(d.labels("agent", a.ID), docker.ContainerLabelArgs{Label: pulumi.String(protocol.LabelDiskMiB), Value: pulumi.String(strconv.Itoa(a.Limits.DiskMiB))})
	container, err := docker.NewContainer(d.ctx, d.n(a.ID), args, d.parent,
		pulumi.DependsOn([]pulumi.Resource{prepare, d.images}))
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}

	// Each bus node joins the agent's network by a per-agent step, so adding
	// an agent neither replaces a bus node nor touches the other agents. The
	// first node's step runs after the container and sets its cgroup PIDs
	// limit too: one step (and one shell) fewer per agent. The agent retries
	// the bus until its link is made.
	after := &pidsFor{container: container, pids: a.Limits.Pids}
	if d.m.Runtime == "runsc" {
		// gVisor's own kernel enforces the nproc ulimit for this sandbox
		// alone, and runsc refuses docker update.
		after.pids = 0
	}
	_, err = d.busLinks(a.ID, netName, a.Subnet, network, after)
	return err
}
