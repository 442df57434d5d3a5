// Package dockerflock declares the dev flock on a Docker engine: the agent and
// bus images, one internal network per agent, the bus, the flock's services,
// the hardened agent containers, and the host steps (directories, credentials, process limits)
// that pulumi-docker cannot express.
package dockerflock

import (
	"fmt"

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
	// Rendered: the bus nodes' configs and the seeds and keys (agents',
	// gateway's, upstreams', services').
	flock.Rendered
}

// DockerFlock is the Docker flock component (type token flock:docker:Flock).
type DockerFlock struct {
	pulumi.ResourceState

	BusURL     pulumi.StringOutput `pulumi:"busUrl"`
	MonitorURL pulumi.StringOutput `pulumi:"monitorUrl"`
}

// New declares the dev flock.
func New(ctx *pulumi.Context, name string, args Args, opts ...pulumi.ResourceOption) (*DockerFlock, error) {
	f := &DockerFlock{}
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
	if err := d.declareServices(); err != nil {
		return fmt.Errorf("services: %w", err)
	}
	return d.m.DeclareMembers(d.declareGateway, d.declareAgent)
}
