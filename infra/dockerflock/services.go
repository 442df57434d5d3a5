package dockerflock

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"

	"github.com/pulumi/pulumi-command/sdk/go/command/local"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// The flock's services on the dev target: one container from the bus image
// (flock-services), hardened like the rest, on an internal network of its
// own that every bus node joins by a link step, as for the gateway. No agent
// network, no egress, no published port: it reaches the bus and nothing
// else, and nothing reaches it.

// ServicesNATSURL lists every bus node on the services' own network.
func ServicesNATSURL(m flock.Model) string { return busNodesOn(m, m.Services.Net) }

// ServicesAddress is the services' address on their network (its last).
func ServicesAddress(m flock.Model) string { return flock.GatewayAddress(m.Services.Net).String() }

// ServicesDir is the host directory of the services' bus key.
func ServicesDir(m flock.Model) string { return path.Join(m.Shared.StateRoot, "services") }

// ServicesScript installs the services' bus key (0400, their UID; base64 on
// stdin, never argv), replaced by rename.
func ServicesScript(m flock.Model, seed string) string {
	dir, uid := ServicesDir(m), m.Services.UID
	var b strings.Builder
	b.WriteString("set -eu\numask 077\n")
	fmt.Fprintf(&b, "install -d -o 0 -g 0 -m 0755 %s\n", dir)
	fmt.Fprintf(&b, "base64 -d > %s/nats.nk.new <<'FLOCK_EOF'\n%s\nFLOCK_EOF\n", dir, base64.StdEncoding.EncodeToString([]byte(seed)))
	fmt.Fprintf(&b, "chown %d:%d %s/nats.nk.new\nchmod 0400 %s/nats.nk.new\nmv -f %s/nats.nk.new %s/nats.nk\n", uid, uid, dir, dir, dir, dir)
	return b.String()
}

func (d *declarer) declareServices() error {
	m := d.m
	if !m.Services.Net.IsValid() {
		return fmt.Errorf("services: flock:network.pool has no slot left for their network")
	}
	step, err := local.NewCommand(d.ctx, d.n("services-key"), &local.CommandArgs{
		Create: pulumi.String(d.args.Host.ShellCommand()),
		// It carries the key: a secret, on stdin.
		Stdin:       pulumi.ToSecret(pulumi.String(ServicesScript(m, d.args.ServicesSeed))).(pulumi.StringOutput),
		Delete:      pulumi.String(d.args.Host.RootCommand("rm -rf " + ServicesDir(m))),
		Environment: pulumi.ToStringMap(d.args.Host.DockerEnv()),
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{d.layout}))
	if err != nil {
		return fmt.Errorf("services key: %w", err)
	}
	own, links, err := d.ownNetwork("services", m.Services.Net, protocol.RoleServices)
	if err != nil {
		return err
	}
	name := d.n("services")
	args := hardened(m.Services.Limits, m.Services.UID, m.Runtime)
	args.Name = pulumi.String(name)
	args.Hostname = pulumi.String("services")
	args.Image = d.busImage.RepoDigest
	args.Entrypoints = pulumi.StringArray{pulumi.String("/flock-services")}
	args.Command = pulumi.StringArray{pulumi.String("run")}
	env := pulumi.StringArray{
		pulumi.String(protocol.EnvServicesNATSURL + "=" + ServicesNATSURL(m)),
		pulumi.String(protocol.EnvServicesNkeyFile + "=" + protocol.ServicesCredsFile),
	}
	if m.OTLP.Endpoint != "" {
		// The spans they derive go to the gateway, which exports them.
		env = append(env, pulumi.String(protocol.EnvServicesSpans+"=on"))
	}
	args.Envs = env
	args.Mounts = docker.ContainerMountArray{bindMount(ServicesDir(m), protocol.ServicesConfigDir, true)}
	args.NetworksAdvanced = docker.ContainerNetworksAdvancedArray{
		docker.ContainerNetworksAdvancedArgs{Name: own.Name, Ipv4Address: pulumi.String(ServicesAddress(m))},
	}
	args.Healthcheck = healthcheck("/flock-services")
	args.Labels = d.labels(protocol.RoleServices, "")
	c, err := docker.NewContainer(d.ctx, name, args, d.parent, pulumi.DependsOn(append([]pulumi.Resource{step, d.images}, links...)))
	if err != nil {
		return fmt.Errorf("services container: %w", err)
	}
	if m.Runtime == "runsc" {
		return nil // as for agents (declareAgent)
	}
	return d.pidsLimit("services", c, m.Services.Limits.Pids)
}
