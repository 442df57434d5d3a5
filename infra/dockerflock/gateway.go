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
	"github.com/ai-flock/ai-flock/infra/gatewayconfig"
	"github.com/ai-flock/ai-flock/protocol"
)

// The gateway on the dev target: one container on the egress network (the
// flock's only network with a route out), on its own internal network to the
// bus, and joined to every agent's network by a per-agent step, as the bus
// is. It knows a caller by the agent network a request comes from.

// GatewayNATSURL lists every bus node on the gateway's own network.
func GatewayNATSURL(m flock.Model) string { return busNodesOn(m, m.Gateway.Net) }

// busNodesOn lists every bus node's client URL on a network of the flock's
// own (the gateway's, the services'), where node n is linked at .n+1.
func busNodesOn(m flock.Model, subnet netip.Prefix) string {
	var urls []string
	for _, n := range m.Bus.BusNodes() {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", nth(subnet.Addr(), n+1), protocol.ClientPort))
	}
	return strings.Join(urls, ",")
}

// AgentGatewayURL is the gateway as agent a calls it, on a's own network.
func AgentGatewayURL(a flock.Agent) string {
	return fmt.Sprintf("http://%s:%d", flock.GatewayAddress(a.Subnet), protocol.GatewayPort)
}

// AgentGatewayEnv is what agent a gets to reach the gateway (none when the
// flock has none): the proxy, where it has one, never for the gateway or bus,
// and the SDKs' key variables holding protocol.GatewayPlaceholderKey.
func AgentGatewayEnv(m flock.Model, a flock.Agent, egressCA string) []string {
	noProxy := []string{flock.GatewayAddress(a.Subnet).String()}
	for _, n := range m.Bus.BusNodes() {
		noProxy = append(noProxy, AgentBusNodeAddress(a, n).String())
	}
	env := gatewayconfig.AgentEnv(m, a, AgentGatewayURL(a), noProxy, egressCA)
	// The gateway knows the agent by its network: its SDKs' key is a
	// placeholder, stripped there.
	for _, k := range gatewayconfig.KeyVars(m) {
		env = append(env, k+"="+protocol.GatewayPlaceholderKey)
	}
	return env
}

// GatewayConfig renders the dev gateway's config: callers by network, keys
// in files, usage to the bus over its own network.
func GatewayConfig(m flock.Model) ([]byte, error) {
	return gatewayconfig.Render(m, gatewayconfig.Options{
		Callers: protocol.CallersByNetwork, NATSURL: GatewayNATSURL(m), NkeyFile: protocol.GatewayCredsFile,
	})
}

func (d *declarer) declareGateway() error {
	m := d.m
	conf, err := GatewayConfig(m)
	if err != nil {
		return err
	}
	name := d.n("gateway")
	env := d.args.Host.DockerEnv()
	if rules, err := gatewayconfig.EgressRulesJSON(m); err != nil {
		return err
	} else if rules != "" {
		env[protocol.EnvGatewayEgressRules] = rules // DockerEnv's map is a new one
	}
	step, err := local.NewCommand(d.ctx, d.n("gateway-config"), &local.CommandArgs{
		Create: pulumi.String(d.args.Host.ShellCommand()),
		// It carries the keys: a secret, on stdin.
		Stdin:       pulumi.ToSecret(pulumi.String(GatewayScript(m, conf, d.args.GatewaySeed, GatewayKeyFiles(m, d.args.Rendered), name))).(pulumi.StringOutput),
		Delete:      pulumi.String(d.args.Host.RootCommand(GatewayCleanupScript(m))),
		Environment: pulumi.ToStringMap(env),
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{d.layout}))
	if err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}

	egress, err := docker.NewNetwork(d.ctx, d.n("egress"), &docker.NetworkArgs{
		Name:   pulumi.String(d.n("egress")),
		Driver: pulumi.String("bridge"),
		IpamConfigs: docker.NetworkIpamConfigArray{docker.NetworkIpamConfigArgs{
			Subnet: pulumi.String(m.Gateway.Egress.String()), Gateway: pulumi.String(m.Gateway.Egress.Addr().Next().String()),
		}},
		// The one network with a route out. Only the gateway joins it.
		Labels: d.netLabels(protocol.RoleEgress, ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("egress network: %w", err)
	}
	own, links, err := d.ownNetwork("gateway", m.Gateway.Net, protocol.RoleGateway)
	if err != nil {
		return err
	}

	args := hardened(m.Gateway.Limits, m.Gateway.UID, m.Runtime)
	args.Name = pulumi.String(name)
	args.Hostname = pulumi.String("gateway")
	args.Image = d.gatewayImage.RepoDigest
	args.Envs = pulumi.StringArray{pulumi.String(protocol.EnvGatewayConfig + "=" + protocol.GatewayConfigFile)}
	args.Mounts = docker.ContainerMountArray{bindMount(GatewayDir(m), protocol.GatewayConfigDir, true)}
	args.NetworksAdvanced = docker.ContainerNetworksAdvancedArray{
		docker.ContainerNetworksAdvancedArgs{Name: egress.Name, Ipv4Address: pulumi.String(flock.GatewayAddress(m.Gateway.Egress).String())},
		docker.ContainerNetworksAdvancedArgs{Name: own.Name, Ipv4Address: pulumi.String(flock.GatewayAddress(m.Gateway.Net).String())},
	}
	args.Healthcheck = healthcheck("/flock-gateway")
	args.Labels = d.labels(protocol.RoleGateway, "")
	// It reloads its config and keys on SIGHUP (the config step sends it):
	// a new agent or key never replaces it.
	c, err := docker.NewContainer(d.ctx, name, args, d.parent, pulumi.DependsOn(append([]pulumi.Resource{step, d.images}, links...)))
	if err != nil {
		return fmt.Errorf("gateway container: %w", err)
	}
	d.gateway = c
	if m.Runtime == "runsc" {
		return nil
	}
	return d.pidsLimit("gateway", c, m.Gateway.Limits.Pids)
}

// ownNetwork declares the internal network <owner>-net of one of the
// flock's own services (the gateway's to the bus, the services'): no route
// out (inhibit_ipv4), the bus nodes joined to it by the links it returns.
func (d *declarer) ownNetwork(owner string, subnet netip.Prefix, role string) (*docker.Network, []pulumi.Resource, error) {
	name := d.n(owner + "-net")
	network, err := docker.NewNetwork(d.ctx, name, &docker.NetworkArgs{
		Name:     pulumi.String(name),
		Driver:   pulumi.String("bridge"),
		Internal: pulumi.Bool(true),
		IpamConfigs: docker.NetworkIpamConfigArray{docker.NetworkIpamConfigArgs{
			Subnet: pulumi.String(subnet.String()), Gateway: pulumi.String(subnet.Addr().Next().String()),
		}},
		Options: pulumi.StringMap{"com.docker.network.bridge.inhibit_ipv4": pulumi.String("true")},
		Labels:  d.netLabels(role, ""),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("%s network: %w", owner, err)
	}
	links, err := d.busLinks(owner, name, subnet, network, nil)
	if err != nil {
		return nil, nil, err
	}
	return network, links, nil
}

// gatewayLink joins the gateway to agent a's network at its fixed address
// (the network's last), by a step of the agent's own: adding an agent never
// replaces the gateway.
func (d *declarer) gatewayLink(a flock.Agent, netName string, network *docker.Network) (pulumi.Resource, error) {
	name := d.n("gateway")
	return local.NewCommand(d.ctx, d.n(a.ID, "gateway-link"), &local.CommandArgs{
		Create:      pulumi.Sprintf("docker network connect --ip %s --alias gateway %s %s 2>&1 | grep -v 'already exists' || true; docker network inspect -f '{{range .Containers}}{{.Name}} {{end}}' %s | grep -qw %s", flock.GatewayAddress(a.Subnet).String(), netName, name, netName, name),
		Delete:      pulumi.Sprintf("docker network disconnect -f %s %s >/dev/null 2>&1 || true", netName, name),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
		Triggers:    pulumi.Array{d.gateway.ID(), network.ID()},
	}, d.parent, pulumi.DeleteBeforeReplace(true))
}

// pidsFor is the container an agent's first bus link follows and the cgroup
// PIDs limit that step sets on it (0: none, under gVisor).
type pidsFor struct {
	container *docker.Container
	pids      int
}

// busLinks joins every bus node to a network of the flock (an agent's, or
// the gateway's) at its fixed address there, one step per node. With after
// set, node 1's step runs once that container exists (again whenever it is
// replaced) and sets its PIDs limit, pulumi-docker having no pidsLimit.
func (d *declarer) busLinks(owner, netName string, subnet netip.Prefix, network *docker.Network, after *pidsFor) ([]pulumi.Resource, error) {
	var links []pulumi.Resource
	for i, node := range d.busNodes {
		num := i + 1
		name, linkName := d.busName(num), d.n(owner, "bus-link")
		ip, alias := nth(subnet.Addr(), 2), "bus"
		if d.m.Bus.Clustered() {
			linkName = d.n(owner, "bus", strconv.Itoa(num), "link")
			ip, alias = nth(subnet.Addr(), num+1), "bus-"+strconv.Itoa(num)
		}
		create := pulumi.Sprintf("docker network connect --ip %s --alias %s %s %s 2>&1 | grep -v 'already exists' || true; docker network inspect -f '{{range .Containers}}{{.Name}} {{end}}' %s | grep -qw %s", ip.String(), alias, netName, name, netName, name)
		triggers := pulumi.Array{node.ID(), network.ID()}
		if after != nil && num == 1 {
			triggers = append(triggers, after.container.ID())
			if after.pids > 0 {
				create = pulumi.Sprintf("%s && %s", create, pidsLimitCommand(after.pids, d.n(owner)))
				triggers = append(triggers, pulumi.Int(after.pids))
			}
		}
		link, err := local.NewCommand(d.ctx, linkName, &local.CommandArgs{
			Create:      create,
			Delete:      pulumi.Sprintf("docker network disconnect -f %s %s >/dev/null 2>&1 || true", netName, name),
			Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
			Triggers:    triggers,
			// Its delete disconnects the node by name: on a replacement it must
			// run before the new link is made, or it would cut the new one.
		}, d.parent, pulumi.DeleteBeforeReplace(true))
		if err != nil {
			return nil, fmt.Errorf("bus link: %w", err)
		}
		links = append(links, link)
	}
	return links, nil
}
