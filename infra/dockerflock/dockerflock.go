// Package dockerflock declares the dev flock on a Docker engine: the agent and
// bus images, one internal network per agent, the bus, the hardened agent
// containers, and the host steps (directories, credentials, process limits)
// that pulumi-docker cannot express.
package dockerflock

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-command/sdk/go/command/local"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Args configure the dev flock.
type Args struct {
	Model flock.Model
	Host  Host
	// AgentContext is the docker build context holding the Dockerfile and the
	// prebuilt binaries (bin/flock-agent, bin/flock-bus).
	AgentContext string
	// BaseImage overrides the Dockerfile's BASE build argument ("scratch" builds offline).
	BaseImage string
	// Seeds are the agents' NATS nkey seeds (agent ID -> seed), kept secret.
	Seeds map[string]string
	// BusConfigs are the rendered bus configs, one per bus node in node
	// order, and BusTopology the topology all nodes share (public keys only).
	BusConfigs  [][]byte
	BusTopology []byte
	// GatewaySeed is the gateway's bus key and GatewayKeys the upstreams'
	// keys (name -> key), kept secret; when the flock has a gateway.
	GatewaySeed string
	GatewayKeys map[string]string
}

// Flock is the dev flock component.
type Flock struct {
	pulumi.ResourceState

	BusURL     pulumi.StringOutput `pulumi:"busUrl"`
	MonitorURL pulumi.StringOutput `pulumi:"monitorUrl"`
}

// BusAddress is the bus network (the pool's slot-0 subnet) and the bus's
// address on it (.2; .1 is the gateway). Monitoring listens there only, so
// agents, which reach the bus only through their own networks, cannot read it.
func BusAddress(m flock.Model) (netip.Prefix, netip.Addr) {
	p := netip.PrefixFrom(m.Network.Pool.Masked().Addr(), m.Network.PrefixLength)
	return p, p.Addr().Next().Next()
}

// BusNodeAddress is bus node n's address on the bus network: .2, .3, .4.
// A clustered bus's routes run there too.
func BusNodeAddress(m flock.Model, n int) netip.Addr {
	_, a := BusAddress(m)
	return nth(a, n-1)
}

// AgentBusAddress is the bus's fixed address on an agent's network: .1 is
// the (unassigned) gateway, .2 the bus; the agent takes the next free one.
func AgentBusAddress(a flock.Agent) netip.Addr { return a.Subnet.Addr().Next().Next() }

// AgentBusNodeAddress is bus node n's fixed address on an agent's network:
// .2, .3, .4. With three nodes the agent's own address is fixed too (.5),
// so the engine never hands an agent an address a node must take later.
func AgentBusNodeAddress(a flock.Agent, n int) netip.Addr { return nth(AgentBusAddress(a), n-1) }

// AgentAddress is a clustered flock's fixed address for agent a (.5).
func AgentAddress(m flock.Model, a flock.Agent) netip.Addr {
	return nth(AgentBusAddress(a), m.Bus.Replicas)
}

// AgentNATSURL lists every bus node on the agent's network: the agent fails
// over between them by itself.
func AgentNATSURL(m flock.Model, a flock.Agent) string {
	var urls []string
	for _, n := range m.Bus.BusNodes() {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", AgentBusNodeAddress(a, n), protocol.ClientPort))
	}
	return strings.Join(urls, ",")
}

// BusURL lists every node's client port as published on the host's loopback
// (node n on 4222+n-1).
func BusURL(m flock.Model) string {
	var urls []string
	for _, n := range m.Bus.BusNodes() {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", protocol.ClientPort+n-1))
	}
	return strings.Join(urls, ",")
}

func nth(a netip.Addr, k int) netip.Addr {
	for range k {
		a = a.Next()
	}
	return a
}

// New declares the dev flock.
func New(ctx *pulumi.Context, name string, args Args, opts ...pulumi.ResourceOption) (*Flock, error) {
	f := &Flock{}
	if err := ctx.RegisterComponentResource("flock:docker:Flock", name, f, opts...); err != nil {
		return nil, err
	}
	d := declarer{ctx: ctx, name: name, args: args, m: args.Model, parent: pulumi.Parent(f)}
	if err := d.declare(); err != nil {
		return nil, err
	}
	f.BusURL = pulumi.String(BusURL(args.Model)).ToStringOutput()
	f.MonitorURL = pulumi.String(fmt.Sprintf("http://127.0.0.1:%d", protocol.MonitorPort)).ToStringOutput()
	return f, ctx.RegisterResourceOutputs(f, pulumi.Map{"busUrl": f.BusURL, "monitorUrl": f.MonitorURL})
}

type declarer struct {
	ctx    *pulumi.Context
	name   string
	args   Args
	m      flock.Model
	parent pulumi.ResourceOption

	agentImage, busImage *docker.Image
	gatewayImage         *docker.Image            // when the flock has a gateway
	ownImages            map[string]*docker.Image // agents' own images, by flock.Image.Key
	images               pulumi.Resource          // removes the images on destroy, after every container
	layout, busConfig    *local.Command
	busNodes             []*docker.Container // node 1 … Replicas
	gateway              *docker.Container
}

// n names a child from the component's name.
func (d *declarer) n(parts ...string) string {
	s := d.name
	for _, p := range parts {
		s += "-" + p
	}
	return s
}

func (d *declarer) declare() error {
	var err error
	if d.agentImage, err = d.image("agent"); err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	if d.busImage, err = d.image("bus"); err != nil {
		return fmt.Errorf("bus image: %w", err)
	}
	images := []pulumi.Resource{d.agentImage, d.busImage}
	names := d.imageName("agent") + " " + d.imageName("bus")
	if d.m.Gateway.Enabled() {
		if d.gatewayImage, err = d.image("gateway"); err != nil {
			return fmt.Errorf("gateway image: %w", err)
		}
		images = append(images, d.gatewayImage)
		names += " " + d.imageName("gateway")
	}
	// Agents' own images: one per distinct spec, shared by the agents that name it.
	d.ownImages = map[string]*docker.Image{}
	for _, a := range d.m.Agents {
		key := a.Image.Key()
		if key == "" || d.ownImages[key] != nil {
			continue
		}
		built, err := d.ownImage(a.Image)
		if err != nil {
			return fmt.Errorf("agent %s's image: %w", a.ID, err)
		}
		d.ownImages[key] = built[len(built)-1]
		for _, b := range built {
			images = append(images, b)
		}
		names += " " + d.ownImageNames(a.Image)
	}
	// docker.Image leaves the local image behind on destroy. Every container
	// depends on this step, so its delete runs after theirs.
	if d.images, err = local.NewCommand(d.ctx, d.n("images-cleanup"), &local.CommandArgs{
		Delete:      pulumi.Sprintf("docker image rm -f %s >/dev/null 2>&1 || true", names),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
	}, d.parent, pulumi.DependsOn(images)); err != nil {
		return fmt.Errorf("images cleanup: %w", err)
	}
	if d.layout, err = local.NewCommand(d.ctx, d.n("host-layout"), &local.CommandArgs{
		Create: pulumi.String(d.args.Host.ShellCommand()),
		Stdin:  pulumi.String(LayoutScript(d.m)),
	}, d.parent); err != nil {
		return fmt.Errorf("host layout: %w", err)
	}
	if err := d.declareBus(); err != nil {
		return err
	}
	if d.m.Gateway.Enabled() {
		if err := d.declareGateway(); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	for _, a := range d.m.Agents {
		if err := d.declareAgent(a); err != nil {
			return fmt.Errorf("agent %s: %w", a.ID, err)
		}
	}
	return nil
}

// image builds one target of agent/Dockerfile from prebuilt static binaries.
func (d *declarer) image(target string) (*docker.Image, error) {
	build := &docker.DockerBuildArgs{
		Context:    pulumi.String(d.args.AgentContext),
		Dockerfile: pulumi.String(d.args.AgentContext + "/Dockerfile"),
		Target:     pulumi.String(target), // the engine's own platform: the binaries are built for it
		// BuildKit: the provider's legacy builder never asks the engine to
		// remove its intermediate containers, so each build left one per
		// Dockerfile step behind; BuildKit leaves none and builds only the target.
		BuilderVersion: docker.BuilderVersionBuilderBuildKit,
	}
	if d.args.BaseImage != "" {
		build.Args = pulumi.StringMap{"BASE": pulumi.String(d.args.BaseImage)}
	}
	return docker.NewImage(d.ctx, d.n(target, "image"), &docker.ImageArgs{
		ImageName: pulumi.String(d.imageName(target)),
		SkipPush:  pulumi.Bool(true),
		Build:     build,
	}, d.parent)
}

// ownImage builds an agent image from the user's: their Dockerfile first
// (when they gave one), then the agent target of agent/Dockerfile on top of
// it (BASE), which adds flock-agent as the entrypoint and its healthcheck.
// It returns the images built, the agent image last.
func (d *declarer) ownImage(img flock.Image) ([]*docker.Image, error) {
	key := img.Key()
	base := pulumi.String(img.Base).ToStringOutput()
	var built []*docker.Image
	var opts []pulumi.ResourceOption
	if img.Dockerfile != "" {
		b, err := docker.NewImage(d.ctx, d.n("agent", key, "base-image"), &docker.ImageArgs{
			ImageName: pulumi.String(d.ownBaseName(key)),
			SkipPush:  pulumi.Bool(true),
			Build: &docker.DockerBuildArgs{
				Context: pulumi.String(img.Context), Dockerfile: pulumi.String(img.Dockerfile),
				BuilderVersion: docker.BuilderVersionBuilderBuildKit,
			},
		}, d.parent)
		if err != nil {
			return nil, err
		}
		built = append(built, b)
		opts = append(opts, pulumi.DependsOn([]pulumi.Resource{b}))
		// By tag (FROM takes no bare image ID), and the ID as an argument of
		// its own, so a new base rebuilds the agent image.
		base = pulumi.String(d.ownBaseName(key)).ToStringOutput()
	}
	args := pulumi.StringMap{"BASE": base}
	if len(built) > 0 {
		args["BASE_ID"] = built[0].RepoDigest
	}
	agent, err := docker.NewImage(d.ctx, d.n("agent", key, "image"), &docker.ImageArgs{
		ImageName: pulumi.String(d.ownAgentName(key)),
		SkipPush:  pulumi.Bool(true),
		Build: &docker.DockerBuildArgs{
			Context:        pulumi.String(d.args.AgentContext),
			Dockerfile:     pulumi.String(d.args.AgentContext + "/Dockerfile"),
			Target:         pulumi.String("agent"),
			Args:           args,
			BuilderVersion: docker.BuilderVersionBuilderBuildKit,
		},
	}, append([]pulumi.ResourceOption{d.parent}, opts...)...)
	if err != nil {
		return nil, err
	}
	return append(built, agent), nil
}

func (d *declarer) ownBaseName(key string) string {
	return fmt.Sprintf("ai-flock/%s-agent-%s-base:latest", d.name, key)
}

func (d *declarer) ownAgentName(key string) string {
	return fmt.Sprintf("ai-flock/%s-agent-%s:latest", d.name, key)
}

// ownImageNames are the local images an agent image spec leaves behind.
func (d *declarer) ownImageNames(img flock.Image) string {
	if img.Dockerfile != "" {
		return d.ownBaseName(img.Key()) + " " + d.ownAgentName(img.Key())
	}
	return d.ownAgentName(img.Key())
}

func (d *declarer) imageName(target string) string {
	return fmt.Sprintf("ai-flock/%s-%s:latest", d.name, target)
}

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

// pidsLimit sets a container's cgroup PIDs limit through the Engine API
// (pulumi-docker has no pids_limit), again whenever the container is
// replaced. The nproc ulimit (per UID, and every container has its own UID)
// holds in the moment between creation and this step.
func (d *declarer) pidsLimit(name string, c *docker.Container, pids int) error {
	_, err := local.NewCommand(d.ctx, d.n(name, "pids-limit"), &local.CommandArgs{
		Create:      pulumi.Sprintf("docker update --pids-limit %d %s >/dev/null", pids, d.n(name)),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
		Triggers:    pulumi.Array{c.ID(), pulumi.Int(pids)},
	}, d.parent)
	return err
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

	// Each bus node (and the gateway) joins each agent network by a
	// per-agent step, so adding an agent neither replaces a bus node nor
	// touches the other agents.
	links, err := d.busLinks(a.ID, netName, a.Subnet, network)
	if err != nil {
		return err
	}
	if d.gateway != nil {
		link, err := d.gatewayLink(a, netName, network)
		if err != nil {
			return fmt.Errorf("gateway link: %w", err)
		}
		links = append(links, link)
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
	for _, e := range AgentGatewayEnv(d.m, a) {
		envs = append(envs, pulumi.String(e))
	}
	args.Envs = envs
	args.Mounts = docker.ContainerMountArray{
		bindMount(d.m.Shared.AgentDir(a.ID), protocol.ContainerAgentDir(a.ID), false),
		bindMount(d.m.Shared.CommonDir(), protocol.ContainerCommonDir(), true),
		bindMount(d.m.Shared.LogFile(a.ID), protocol.ContainerLogFile(a.ID), false),
		bindMount(d.m.Shared.CredsDir(a.ID), protocol.ContainerCredsDir, true),
	}
	agentNet := docker.ContainerNetworksAdvancedArgs{Name: network.Name}
	if d.m.Bus.Clustered() {
		agentNet.Ipv4Address = pulumi.String(AgentAddress(d.m, a).String())
	}
	args.NetworksAdvanced = docker.ContainerNetworksAdvancedArray{agentNet}
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
		pulumi.DependsOn(append([]pulumi.Resource{prepare, d.images}, links...)))
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}

	if d.m.Runtime == "runsc" {
		// gVisor's own kernel enforces the nproc ulimit for this sandbox
		// alone, and runsc refuses docker update.
		return nil
	}
	if err := d.pidsLimit(a.ID, container, a.Limits.Pids); err != nil {
		return fmt.Errorf("pids limit: %w", err)
	}
	return nil
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
