package stacks

import (
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/dockerflock"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Run is the Pulumi program of every stack: it dispatches on flock:target.
func Run(ctx *pulumi.Context) error {
	s, err := Load(ctx)
	if err != nil {
		return err
	}
	keys, err := deriveKeys(s)
	if err != nil {
		return err
	}
	switch s.Model.Target {
	case flock.TargetDocker:
		err = runDocker(ctx, s, keys)
	case flock.TargetAWS:
		err = runAWS(ctx, s, keys)
	default:
		err = fmt.Errorf("flock:target: unsupported target %q", s.Model.Target)
	}
	if err != nil {
		return err
	}
	exportCommon(ctx, s.Model, keys)
	return nil
}

// Keys are every bus user's credentials, derived from flock:busSecret.
type Keys struct {
	Operator credentials.Key
	Agents   map[string]credentials.Key
	Gateway  credentials.Key // when the flock has a gateway
}

func deriveKeys(s Settings) (Keys, error) {
	k := Keys{Agents: map[string]credentials.Key{}}
	var err error
	if k.Operator, err = credentials.Derive(s.BusSecret, protocol.OperatorUser); err != nil {
		return Keys{}, err
	}
	for _, a := range s.Model.Agents {
		if k.Agents[a.ID], err = credentials.Derive(s.BusSecret, protocol.AgentUser(a.ID)); err != nil {
			return Keys{}, err
		}
	}
	if s.Model.Gateway.Enabled() {
		if k.Gateway, err = credentials.Derive(s.BusSecret, protocol.GatewayUser); err != nil {
			return Keys{}, err
		}
	}
	return k, nil
}

// PublicKeys are what the bus config needs: no seeds.
func (k Keys) PublicKeys() busconfig.PublicKeys {
	p := busconfig.PublicKeys{Operator: k.Operator.Public, Agents: map[string]string{}, Gateway: k.Gateway.Public}
	for id, key := range k.Agents {
		p.Agents[id] = key.Public
	}
	return p
}

func runDocker(ctx *pulumi.Context, s Settings, keys Keys) error {
	args := s.Docker
	// Each node's monitoring and routes listen on its bus-network address.
	var routes []string
	for _, n := range s.Model.Bus.BusNodes() {
		routes = append(routes, dockerflock.BusNodeAddress(s.Model, n).String())
	}
	for _, n := range s.Model.Bus.BusNodes() {
		host := dockerflock.BusNodeAddress(s.Model, n).String()
		opt := busconfig.Options{MonitorHost: host}
		if s.Model.Bus.Clustered() {
			opt.Node, opt.RouteHost, opt.Routes = n, host, routes
		}
		conf, err := busconfig.Render(s.Model, keys.PublicKeys(), opt)
		if err != nil {
			return err
		}
		args.BusConfigs = append(args.BusConfigs, conf)
	}
	// The operator's host reaches the bus from the bus network (published
	// ports), the gateway from its own: neither counts against an agent's
	// share of the bus's connections.
	busNet, _ := dockerflock.BusAddress(s.Model)
	uncounted := []netip.Prefix{busNet}
	if s.Model.Gateway.Enabled() {
		uncounted = append(uncounted, s.Model.Gateway.Net)
	}
	topology, err := busconfig.RenderTopology(s.Model, uncounted...)
	if err != nil {
		return err
	}
	args.Seeds = map[string]string{}
	for id, k := range keys.Agents {
		args.Seeds[id] = k.Seed
	}
	args.BusTopology = topology
	args.GatewaySeed, args.GatewayKeys = keys.Gateway.Seed, s.GatewayKeys
	f, err := dockerflock.New(ctx, s.Model.Name, args)
	if err != nil {
		return fmt.Errorf("dev flock: %w", err)
	}
	ctx.Export("busUrl", f.BusURL)
	ctx.Export("monitorUrl", f.MonitorURL)
	return nil
}

func runAWS(ctx *pulumi.Context, s Settings, keys Keys) error {
	args := s.AWS
	var err error
	// Monitoring listens on every address of the bus task: its security
	// group admits the monitoring port from the operator task only. A
	// cluster node's routes listen on every address too (the group admits
	// the route port from the bus nodes only) and reach the others by their
	// Cloud Map names; its store is on its own task storage.
	hosts := awsflock.BusHosts(s.Model, args.Namespace)
	for _, n := range s.Model.Bus.BusNodes() {
		opt := busconfig.Options{StoreDir: protocol.BusStoreDir}
		if s.Model.Bus.Clustered() {
			opt = busconfig.Options{StoreDir: awsflock.BusNodeStoreDir, Node: n, RouteHost: "0.0.0.0", Routes: hosts}
		}
		conf, err := busconfig.Render(s.Model, keys.PublicKeys(), opt)
		if err != nil {
			return fmt.Errorf("bus node %d: %w", n, err)
		}
		args.BusConfigs = append(args.BusConfigs, conf)
	}
	// Every task has an address of its own and is counted; operators on
	// flock:aws.operatorCidrs (a VPN, where many may share an address) are not.
	var uncounted []netip.Prefix
	for _, c := range args.OperatorCIDRs {
		if p, err := netip.ParsePrefix(c); err == nil {
			uncounted = append(uncounted, p)
		}
	}
	if args.BusTopology, err = busconfig.RenderTopology(s.Model, uncounted...); err != nil {
		return err
	}
	args.Seeds = map[string]string{}
	for id, k := range keys.Agents {
		args.Seeds[id] = k.Seed
	}
	args.OperatorSeed = keys.Operator.Seed
	if s.Model.Gateway.Enabled() {
		if err := awsGateway(s, keys, &args); err != nil {
			return err
		}
	}
	f, err := awsflock.New(ctx, s.Model.Name, args)
	if err != nil {
		return fmt.Errorf("aws flock: %w", err)
	}
	ctx.Export("busUrl", f.BusURL)
	ctx.Export("monitorUrl", f.MonitorURL)
	ctx.Export("cluster", f.ClusterName)
	ctx.Export("repositoryUrl", f.RepositoryURL)
	ctx.Export("fileSystemId", f.FileSystemID)
	ctx.Export("operatorTaskDefinition", f.OperatorTaskDefinition)
	ctx.Export("operatorSecurityGroup", f.OperatorSecurityGroupID)
	ctx.Export("subnets", f.SubnetIDs)
	return nil
}

// awsGateway gives the aws gateway what it needs: each agent's gateway
// token, derived from the bus secret (agents share one network on aws, so
// the gateway knows a caller by its token), its config (callers by token;
// each key in the variable its secret fills; usage to the bus at the URL
// agents use, as the gateway bus user whose seed its secret fills), its
// seed and the upstreams' keys.
func awsGateway(s Settings, keys Keys, args *awsflock.Args) error {
	args.GatewayTokens = map[string]string{}
	for _, a := range s.Model.Agents {
		t, err := credentials.GatewayToken(s.BusSecret, a.ID)
		if err != nil {
			return fmt.Errorf("agent %s: %w", a.ID, err)
		}
		args.GatewayTokens[a.ID] = t
	}
	conf, err := awsflock.GatewayConfig(s.Model, args.Namespace, args.GatewayTokens)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	args.GatewayConfig, args.GatewaySeed, args.GatewayKeys = conf, keys.Gateway.Seed, s.GatewayKeys
	return nil
}

// exportCommon exports what every target shares: the agents and the
// operator's credential (a secret: `pulumi stack output operatorSeed --show-secrets`).
func exportCommon(ctx *pulumi.Context, m flock.Model, keys Keys) {
	agents := pulumi.Array{}
	for _, a := range m.Agents {
		out := pulumi.Map{
			"id":   pulumi.String(a.ID),
			"slot": pulumi.Int(a.Slot),
			"uid":  pulumi.Int(a.UID),
			"gid":  pulumi.Int(a.GID),
		}
		if m.Target == flock.TargetDocker { // host paths and subnets exist on the Docker host only
			out["dir"] = pulumi.String(m.Shared.AgentDir(a.ID))
			out["logFile"] = pulumi.String(m.Shared.LogFile(a.ID))
			out["subnet"] = pulumi.String(a.Subnet.String())
		}
		agents = append(agents, out)
	}
	ctx.Export("agents", agents)
	if m.Target == flock.TargetDocker {
		ctx.Export("sharedRoot", pulumi.String(m.Shared.Root))
	}
	ctx.Export("operatorSeed", pulumi.ToSecret(pulumi.String(keys.Operator.Seed)))
}
