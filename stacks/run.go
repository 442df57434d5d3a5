package stacks

import (
	"fmt"
	"maps"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Target is a stack's component as the program sees it: it declares the
// flock of the validated settings with the bus credentials, and returns the
// outputs only that target has (every target's are exportCommon's).
type Target interface {
	Deploy(ctx *pulumi.Context, s Settings, keys Keys) (Outputs, error)
}

// Outputs are stack outputs by name.
type Outputs map[string]pulumi.Input

// targets are the components, by flock:target.
var targets = map[flock.Target]Target{
	flock.TargetDocker: dockerTarget{},
	flock.TargetAWS:    awsTarget{},
}

// Run is the Pulumi program of every stack: it dispatches on flock:target.
func Run(ctx *pulumi.Context) error {
	s, err := Load(ctx)
	if err != nil {
		return err
	}
	for _, w := range s.Model.Warnings {
		_ = ctx.Log.Warn(w, nil)
	}
	keys, err := deriveKeys(s)
	if err != nil {
		return err
	}
	target, ok := targets[s.Model.Target]
	if !ok {
		return fmt.Errorf("flock:target: unsupported target %q", s.Model.Target)
	}
	outputs, err := target.Deploy(ctx, s, keys)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(outputs)) {
		ctx.Export(name, outputs[name])
	}
	exportCommon(ctx, s.Model, keys)
	return nil
}

// Keys are every bus user's credentials, derived from flock:busSecret.
type Keys struct {
	Operator credentials.Key
	Agents   map[string]credentials.Key
	Gateway  credentials.Key // when the flock has a gateway
	Services credentials.Key // the flock's services (the board)
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
	if k.Services, err = credentials.Derive(s.BusSecret, protocol.ServicesUser); err != nil {
		return Keys{}, err
	}
	return k, nil
}

// PublicKeys are what the bus config needs: no seeds.
func (k Keys) PublicKeys() busconfig.PublicKeys {
	p := busconfig.PublicKeys{Operator: k.Operator.Public, Agents: map[string]string{}, Gateway: k.Gateway.Public, Services: k.Services.Public}
	for id, key := range k.Agents {
		p.Agents[id] = key.Public
	}
	return p
}

// AgentSeeds are the agents' seeds (agent ID -> seed), which the flock
// components keep secret.
func (k Keys) AgentSeeds() map[string]string {
	seeds := map[string]string{}
	for id, key := range k.Agents {
		seeds[id] = key.Seed
	}
	return seeds
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
