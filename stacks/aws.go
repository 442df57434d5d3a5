package stacks

import (
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
)

// awsTarget is the aws stack's: the flock on ECS Fargate.
type awsTarget struct{}

// Deploy renders each bus node's config, gives the model gateway its
// tokens and config, and declares the ECS flock component.
func (awsTarget) Deploy(ctx *pulumi.Context, s Settings, keys Keys) (Outputs, error) {
	args := s.AWS
	// Monitoring listens on every address of the bus task: its security
	// group admits the monitoring port from the operator task only. A
	// cluster node's routes listen on every address too (the group admits
	// the route port from the bus nodes only) and reach the others by their
	// Cloud Map names; its store is on its own task storage.
	hosts := awsflock.BusHosts(s.Model, args.Namespace)
	node := func(n int) busconfig.Options {
		if s.Model.Bus.Clustered() {
			return busconfig.Options{StoreDir: awsflock.BusNodeStoreDir, Node: n, RouteHost: "0.0.0.0", Routes: hosts}
		}
		return busconfig.Options{StoreDir: protocol.BusStoreDir}
	}
	// Every task has an address of its own and is counted; operators on
	// flock:aws.operatorCidrs (a VPN, where many may share an address) are not.
	var uncounted []netip.Prefix
	for _, c := range args.OperatorCIDRs {
		if p, err := netip.ParsePrefix(c); err == nil {
			uncounted = append(uncounted, p)
		}
	}
	var err error
	if args.Rendered, err = render(s, keys, node, uncounted); err != nil {
		return nil, err
	}
	// The operator task's own seed; the flock's services (the board)
	// connect as their own bus user, their seed a Pulumi secret in Secrets
	// Manager like the others.
	args.OperatorSeed = keys.Operator.Seed
	if s.Model.Gateway.Enabled() {
		if err := awsGateway(s, keys, &args); err != nil {
			return nil, err
		}
	}
	f, err := awsflock.New(ctx, s.Model.Name, args)
	if err != nil {
		return nil, fmt.Errorf("aws flock: %w", err)
	}
	return Outputs{
		"busUrl":                 f.BusURL,
		"monitorUrl":             f.MonitorURL,
		"cluster":                f.ClusterName,
		"repositoryUrl":          f.RepositoryURL,
		"fileSystemId":           f.FileSystemID,
		"operatorTaskDefinition": f.OperatorTaskDefinition,
		"operatorSecurityGroup":  f.OperatorSecurityGroupID,
		"subnets":                f.SubnetIDs,
	}, nil
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
	conf, err := awsflock.GatewayConfig(s.Model, args.Namespace, args.Network.CIDR, args.GatewayTokens)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	args.GatewayConfig = conf
	return nil
}
