package stacks

import (
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/dockerflock"
)

// dockerTarget is the dev stack's: the flock on a Docker engine.
type dockerTarget struct{}

// Deploy renders each bus node's config for its address on the bus network
// and declares the Docker flock component.
func (dockerTarget) Deploy(ctx *pulumi.Context, s Settings, keys Keys) (Outputs, error) {
	args := s.Docker
	// Each node's monitoring and routes listen on its bus-network address.
	var routes []string
	for _, n := range s.Model.Bus.BusNodes() {
		routes = append(routes, dockerflock.BusNodeAddress(s.Model, n).String())
	}
	node := func(n int) busconfig.Options {
		host := dockerflock.BusNodeAddress(s.Model, n).String()
		opt := busconfig.Options{MonitorHost: host}
		if s.Model.Bus.Clustered() {
			opt.Node, opt.RouteHost, opt.Routes = n, host, routes
		}
		return opt
	}
	// The operator's host reaches the bus from the bus network (published
	// ports), the services and the gateway from their own: none counts
	// against an agent's share of the bus's connections.
	busNet, _ := dockerflock.BusAddress(s.Model)
	uncounted := []netip.Prefix{busNet, s.Model.Services.Net}
	if s.Model.Gateway.Enabled() {
		uncounted = append(uncounted, s.Model.Gateway.Net)
	}
	var err error
	if args.Rendered, err = render(s, keys, node, uncounted); err != nil {
		return nil, err
	}
	f, err := dockerflock.New(ctx, s.Model.Name, args)
	if err != nil {
		return nil, fmt.Errorf("dev flock: %w", err)
	}
	return Outputs{"busUrl": f.BusURL, "monitorUrl": f.MonitorURL}, nil
}
