package stacks

import (
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol/egressca"
)

// render renders what both components take alike (flock.Rendered): each
// bus node's config with the options its target gives that node, the
// topology (uncounted: the ranges whose connections count against no
// agent's share), and the seeds and upstream keys.
func render(s Settings, keys Keys, node func(n int) busconfig.Options, uncounted []netip.Prefix) (flock.Rendered, error) {
	r := flock.Rendered{
		Seeds:        keys.AgentSeeds(),
		ServicesSeed: keys.Services.Seed,
	}
	for _, n := range s.Model.Bus.BusNodes() {
		conf, err := busconfig.Render(s.Model, keys.PublicKeys(), node(n))
		if err != nil {
			return flock.Rendered{}, fmt.Errorf("bus node %d: %w", n, err)
		}
		r.BusConfigs = append(r.BusConfigs, conf)
	}
	topology, err := busconfig.RenderTopology(s.Model, busconfig.Peers{Uncounted: uncounted, Unthrottled: []string{keys.Services.Public}})
	if err != nil {
		return flock.Rendered{}, err
	}
	r.BusTopology = topology
	if s.Model.Gateway.Enabled() {
		r.GatewaySeed, r.GatewayKeys = keys.Gateway.Seed, s.GatewayKeys
		r.EgressSecrets = s.EgressSecrets
	}
	if s.Model.Gateway.Brokered() {
		seed, err := credentials.EgressCASeed(s.BusSecret, s.Model.Name)
		if err != nil {
			return flock.Rendered{}, err
		}
		pem, err := egressca.CertPEM(seed, s.Model.Name)
		if err != nil {
			return flock.Rendered{}, err
		}
		r.EgressCASeed, r.EgressCA = hex.EncodeToString(seed), pem
	}
	return r, nil
}
