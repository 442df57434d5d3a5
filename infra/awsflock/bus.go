package awsflock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/servicediscovery"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// The bus runs as one ECS service per node. With flock:bus.replicas 1 it is
// the service <flock>-bus, found as bus.<namespace>, its JetStream store on
// its EFS access point. With 3 each node n is the service <flock>-bus-<n>,
// found as bus-<n>.<namespace>, its store on the task's own ephemeral
// storage: JetStream keeps every stream on all three nodes, so a node that
// comes back empty catches up from the other two, and no node's store is
// shared with anything.

// BusNodeStoreDir is a clustered bus node's JetStream store: under the
// task's writable /run volume (task storage, gone with the task).
const BusNodeStoreDir = protocol.BusRuntimeDir + "/store"

// Task storage on Fargate.
const (
	// FreeTaskStorageGiB is what every Fargate task gets without asking
	// (and without paying for it).
	FreeTaskStorageGiB = 20
	// MaxTaskStorageGiB is the most a Fargate task may ask for.
	MaxTaskStorageGiB = 200
	// StoreHeadroomMiB is what a node's task storage holds besides the
	// JetStream store: the image, /tmp, the rendered config, and the
	// store's own overshoot while it compacts.
	StoreHeadroomMiB = 4096
)

// ClusterStartPeriod is the health check start period of a clustered bus
// node (seconds): long enough to find its peers, elect leaders and catch
// up, during which a failing check does not count.
const ClusterStartPeriod = 300

// BusStorageGiB is the task storage a clustered bus node asks of Fargate:
// 0 when the store (flock:bus.jetStreamMaxMiB) and its headroom fit in the
// free 20 GiB, else enough for both. It is an error when they need more
// than Fargate's 200 GiB.
func BusStorageGiB(m flock.Model) (int, error) {
	need := int(m.Bus.JetStreamMaxBytes>>20) + StoreHeadroomMiB
	if need <= FreeTaskStorageGiB<<10 {
		return 0, nil
	}
	gib := (need + 1023) >> 10
	if gib > MaxTaskStorageGiB {
		return 0, &flock.Error{Key: "flock:bus.jetStreamMaxMiB", Rule: fmt.Sprintf(
			"a clustered bus node keeps its store on Fargate task storage: %d MiB and %d MiB of headroom need %d GiB, Fargate gives a task at most %d GiB: set at most %d MiB (or flock:bus.replicas 1, whose store is on EFS)",
			m.Bus.JetStreamMaxBytes>>20, StoreHeadroomMiB, gib, MaxTaskStorageGiB, MaxTaskStorageGiB<<10-StoreHeadroomMiB)}
	}
	return gib, nil
}

// BusHost is the single bus's DNS name in the namespace (flock:bus.replicas 1).
func BusHost(namespace string) string { return "bus." + namespace }

// BusNodeHost is node n's DNS name in the namespace (a clustered bus).
func BusNodeHost(namespace string, n int) string { return "bus-" + strconv.Itoa(n) + "." + namespace }

// BusHosts are the DNS names of every bus node, in node order.
func BusHosts(m flock.Model, namespace string) []string {
	if !m.Bus.Clustered() {
		return []string{BusHost(namespace)}
	}
	var out []string
	for _, n := range m.Bus.BusNodes() {
		out = append(out, BusNodeHost(namespace, n))
	}
	return out
}

// BusURL is what agents and the operator connect to: every node's client
// URL, comma-separated (the NATS clients try them in turn and fail over).
func BusURL(m flock.Model, namespace string) string {
	var urls []string
	for _, h := range BusHosts(m, namespace) {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", h, protocol.ClientPort))
	}
	return strings.Join(urls, ",")
}

// MonitorURL is the monitoring endpoint of the (first) bus node.
func MonitorURL(m flock.Model, namespace string) string {
	return fmt.Sprintf("http://%s:%d", BusHosts(m, namespace)[0], protocol.MonitorPort)
}

// busNodeKey names node n's resources (names.go).
func (d *declarer) busNodeKey(n int) string { return busNodeKey(d.m, n) }

// declareBus declares every bus node, each after the one before it has
// reached its steady state (node 1 bootstraps, each next node joins a
// cluster that is up; on a change, Pulumi replaces them in the same order,
// one at a time), and keeps the last one: the agents and the gateway start
// after it.
func (d *declarer) declareBus() error {
	var prev pulumi.Resource
	for _, n := range d.m.Bus.BusNodes() {
		svc, err := d.declareBusNode(n, prev)
		if err != nil {
			return fmt.Errorf("node %d: %w", n, err)
		}
		prev = svc
	}
	d.bus = prev
	return nil
}

// declareBusNode: one node as a one-task service, its config delivered
// from Secrets Manager (busenv), registered in Cloud Map under its own
// name. A single bus keeps its store on its EFS access point; a cluster
// node keeps it on its own task storage, and its task role mounts nothing.
func (d *declarer) declareBusNode(n int, after pulumi.Resource) (pulumi.Resource, error) {
	key := d.busNodeKey(n)
	clustered := d.m.Bus.Clustered()
	lg, err := d.logGroup(key, "bus", "", TaskLogGroupName(d.ctx.Stack(), d.name, key))
	if err != nil {
		return nil, err
	}
	conf := d.args.BusConfigs[n-1]
	t := &task{
		key: key, role: "bus", uid: d.m.Bus.UID, gid: d.m.Bus.UID, limits: d.m.Bus.Limits,
		image: d.busImg.RepoDigest, logGroup: lg,
		env: map[string]string{},
		ports: []PortMapping{
			{ContainerPort: protocol.ClientPort, HostPort: protocol.ClientPort, Protocol: "tcp", Name: "nats"},
			{ContainerPort: protocol.MonitorPort, HostPort: protocol.MonitorPort, Protocol: "tcp", Name: "monitor"},
		},
		health: []string{"CMD", "/flock-bus", "health"},
	}
	if clustered {
		t.ports = append(t.ports, PortMapping{ContainerPort: protocol.RoutePort, HostPort: protocol.RoutePort, Protocol: "tcp", Name: "route"})
		t.healthStart = ClusterStartPeriod
		if t.ephemeralGiB, err = BusStorageGiB(d.m); err != nil {
			return nil, err
		}
	} else {
		t.volumes = []volume{{name: VolumeStore, ap: d.busAP, path: protocol.BusStoreDir}}
		t.rw = []*efs.AccessPoint{d.busAP}
	}
	for _, f := range []struct {
		prefix, name, what string
		data               []byte
	}{
		{protocol.EnvBusConfig, "config", "NATS server config", conf},
		{protocol.EnvBusTopology, "topology", "JetStream topology", d.args.BusTopology},
	} {
		parts, err := protocol.EncodeEnv(f.data)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", key, f.name, err)
		}
		t.env[protocol.EnvPartsVar(f.prefix)] = strconv.Itoa(len(parts))
		for i, p := range parts {
			// Public keys, permissions and the cluster's layout: stored in
			// Secrets Manager to reach the task without a host. (The
			// provider holds every secret value as a Pulumi secret.)
			desc := fmt.Sprintf("AI Flock %s bus: %s, part %d of %d (gzip+base64)", d.name, f.what, i+1, len(parts))
			if clustered {
				desc = fmt.Sprintf("AI Flock %s bus node %d: %s, part %d of %d (gzip+base64)", d.name, n, f.what, i+1, len(parts))
			}
			s, v, err := d.secret(fmt.Sprintf("%s-%s-%d", key, f.name, i+1), "bus", "", desc, pulumi.String(p))
			if err != nil {
				return nil, err
			}
			t.secrets = append(t.secrets, secretRef{env: protocol.EnvPartVar(f.prefix, i+1), arn: s.Arn})
			t.deps = append(t.deps, v)
		}
	}
	registry, err := d.busDiscovery(key)
	if err != nil {
		return nil, err
	}
	td, err := d.define(t)
	if err != nil {
		return nil, err
	}
	var deps []pulumi.Resource
	if after != nil {
		deps = append(deps, after)
	}
	// Every node waits for its steady state, a single one too: what starts
	// after the bus (the next node, the agents, the gateway) starts once it
	// runs, not while ECS is still placing it.
	return d.serve(t, td, d.sg.bus.ID(), pulumi.StringMap{
		"config": pulumi.String(digest(string(conf), string(d.args.BusTopology))),
	}, registry, deps, true)
}

// busDiscovery is a node's Cloud Map service: an A record <key>.<namespace>
// (bus, or bus-<n>) that ECS fills with the node's task address while the
// task is healthy.
func (d *declarer) busDiscovery(key string) (*servicediscovery.Service, error) {
	s, err := servicediscovery.NewService(d.ctx, d.n(key+"-discovery"), &servicediscovery.ServiceArgs{
		Name: pulumi.String(key),
		DnsConfig: servicediscovery.ServiceDnsConfigArgs{
			NamespaceId:   d.namespace.ID(),
			DnsRecords:    servicediscovery.ServiceDnsConfigDnsRecordArray{servicediscovery.ServiceDnsConfigDnsRecordArgs{Ttl: pulumi.Int(10), Type: pulumi.String("A")}},
			RoutingPolicy: pulumi.String("MULTIVALUE"),
		},
		// ECS reports the task's health: an unhealthy node leaves DNS.
		HealthCheckCustomConfig: servicediscovery.ServiceHealthCheckCustomConfigArgs{FailureThreshold: pulumi.Int(1)},
		ForceDestroy:            pulumi.Bool(true),
		Tags:                    d.tags("discovery", ""),
	}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("%s discovery: %w", key, err)
	}
	return s, nil
}
