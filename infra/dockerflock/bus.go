package dockerflock

import (
	"fmt"
	"net"
	"strconv"

	"github.com/pulumi/pulumi-command/sdk/go/command/local"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/protocol"
)

// busName names bus node num's container: "<flock>-bus" for a single node,
// "<flock>-bus-<n>" for the nodes of a cluster.
func (d *declarer) busName(num int) string {
	if !d.m.Bus.Clustered() {
		return d.n("bus")
	}
	return d.n("bus", strconv.Itoa(num))
}

// BusContainerNames are the bus nodes' container names, in node order.
func BusContainerNames(name string, replicas int) []string {
	if replicas <= 1 {
		return []string{name + "-bus"}
	}
	var out []string
	for n := 1; n <= replicas; n++ {
		out = append(out, name+"-bus-"+strconv.Itoa(n))
	}
	return out
}

// BusConfigFile is node num's config file name in the bus config directory.
func BusConfigFile(clustered bool, num int) string {
	if !clustered {
		return "nats.conf"
	}
	return "nats-" + strconv.Itoa(num) + ".conf"
}

// BusDataDir is node num's JetStream store on the host: each node its own.
func BusDataDir(busDir string, clustered bool, num int) string {
	if !clustered {
		return busDir + "/data"
	}
	return busDir + "/data-" + strconv.Itoa(num)
}

func (d *declarer) declareBus() error {
	var err error
	if len(d.args.BusConfigs) != len(d.m.Bus.BusNodes()) {
		return fmt.Errorf("bus: %d rendered configs for %d nodes", len(d.args.BusConfigs), len(d.m.Bus.BusNodes()))
	}
	if d.busConfig, err = local.NewCommand(d.ctx, d.n("bus-config"), &local.CommandArgs{
		Create:      pulumi.String(d.args.Host.ShellCommand()),
		Stdin:       pulumi.String(BusConfigScript(d.m, d.args.BusConfigs, d.args.BusTopology, BusContainerNames(d.name, d.m.Bus.Replicas))),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{d.layout})); err != nil {
		return fmt.Errorf("bus config: %w", err)
	}

	subnet, _ := BusAddress(d.m)
	busNet, err := docker.NewNetwork(d.ctx, d.n("bus-net"), &docker.NetworkArgs{
		Name:   pulumi.String(d.n("bus-net")),
		Driver: pulumi.String("bridge"),
		IpamConfigs: docker.NetworkIpamConfigArray{docker.NetworkIpamConfigArgs{
			Subnet: pulumi.String(subnet.String()), Gateway: pulumi.String(subnet.Addr().Next().String()),
		}},
		Options: pulumi.StringMap{
			// Only bus nodes live here: the network publishes the operator and
			// monitoring ports (bound to loopback by default) and carries a
			// cluster's routes, the one traffic between containers it allows.
			"com.docker.network.bridge.enable_icc":        pulumi.String(strconv.FormatBool(d.m.Bus.Clustered())),
			"com.docker.network.bridge.host_binding_ipv4": pulumi.String("127.0.0.1"),
		},
		Labels: d.netLabels("bus", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("bus network: %w", err)
	}
	for _, num := range d.m.Bus.BusNodes() {
		c, err := d.declareBusNode(num, busNet)
		if err != nil {
			return fmt.Errorf("bus node %d: %w", num, err)
		}
		d.busNodes = append(d.busNodes, c)
	}
	return nil
}

// declareBusNode declares one bus container: the hardened flock container,
// its own store, its config, the bus network at its fixed address, its
// client, monitoring and metrics ports on the host's loopback (node n on
// 4222+n-1, 8222+n-1 and 9464+n-1).
func (d *declarer) declareBusNode(num int, busNet *docker.Network) (*docker.Container, error) {
	clustered := d.m.Bus.Clustered()
	name := d.busName(num)
	hostname := "bus"
	if clustered {
		hostname = "bus-" + strconv.Itoa(num)
	}
	args := hardened(d.m.Bus.Limits, d.m.Bus.UID, d.m.Runtime)
	args.Name = pulumi.String(name)
	args.Hostname = pulumi.String(hostname)
	args.Image = d.busImage.RepoDigest
	args.Envs = pulumi.StringArray{
		pulumi.String("FLOCK_BUS_CONFIG=" + protocol.BusConfigDir + "/" + BusConfigFile(clustered, num)),
		pulumi.String("FLOCK_BUS_TOPOLOGY=" + protocol.BusTopologyFile),
		// The relay of the services' metrics, published on loopback below:
		// on the bus network's address only (as the monitoring port), so
		// that no agent, which reaches the bus through its own network,
		// can read it.
		pulumi.String(protocol.EnvBusMetricsListen + "=" + net.JoinHostPort(BusNodeAddress(d.m, num).String(), strconv.Itoa(protocol.MetricsPort))),
	}
	args.Mounts = docker.ContainerMountArray{
		bindMount(d.m.Shared.BusDir()+"/config", protocol.BusConfigDir, true),
		bindMount(BusDataDir(d.m.Shared.BusDir(), clustered, num), protocol.BusStoreDir, false),
	}
	args.NetworksAdvanced = docker.ContainerNetworksAdvancedArray{docker.ContainerNetworksAdvancedArgs{
		Name: busNet.Name, Ipv4Address: pulumi.String(BusNodeAddress(d.m, num).String()), Aliases: pulumi.StringArray{pulumi.String(hostname)},
	}}
	args.Ports = docker.ContainerPortArray{
		loopbackPort(protocol.ClientPort, protocol.ClientPort+num-1), loopbackPort(protocol.MonitorPort, protocol.MonitorPort+num-1),
		loopbackPort(protocol.MetricsPort, protocol.MetricsPort+num-1),
	}
	args.Healthcheck = healthcheck("/flock-bus")
	args.Labels = d.labels("bus", "")
	// The bus reloads its bind-mounted config on SIGHUP: a new agent never needs a new bus.
	c, err := docker.NewContainer(d.ctx, name, args, d.parent, pulumi.DependsOn([]pulumi.Resource{d.busConfig, d.images}))
	if err != nil {
		return nil, fmt.Errorf("bus container: %w", err)
	}
	if d.m.Runtime == "runsc" {
		return c, nil // as for agents (declareAgent)
	}
	pidsName := "bus"
	if clustered {
		pidsName = "bus-" + strconv.Itoa(num)
	}
	if err := d.pidsLimit(pidsName, c, d.m.Bus.Limits.Pids); err != nil {
		return nil, fmt.Errorf("pids limit: %w", err)
	}
	return c, nil
}
