package dockerflock

import (
	"fmt"

	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// image builds one target of agent/Dockerfile from prebuilt static binaries.
func (d *declarer) image(target string) (*docker.Image, error) {
	build := &docker.DockerBuildArgs{
		Context:    pulumi.String(d.args.AgentContext),
		Dockerfile: pulumi.String(d.args.AgentContext + "/Dockerfile"),
		Target:     pulumi.String(target), // the engine's own platform: the binaries are built for it
		// BuildKit: the provider's legacy builder never asks the engine to
		// remove its intermediate containers, so each build left one per
		// Dockerfile step behind; BuildKit leaves none and builds only the target.
		BuilderVersion: docker.BuilderVersionBuilderBuildKit,
	}
	if d.args.BaseImage != "" {
		build.Args = pulumi.StringMap{"BASE": pulumi.String(d.args.BaseImage)}
	}
	return docker.NewImage(d.ctx, d.n(target, "image"), &docker.ImageArgs{
		ImageName: pulumi.String(d.imageName(target)),
		SkipPush:  pulumi.Bool(true),
		Build:     build,
	}, d.parent)
}

// ownImage builds an agent image from the user's: their Dockerfile first
// (when they gave one), then the agent target of agent/Dockerfile on top of
// it (BASE), which adds flock-agent as the entrypoint and its healthcheck.
// It returns the images built, the agent image last.
func (d *declarer) ownImage(img flock.Image) ([]*docker.Image, error) {
	key := img.Key()
	base := pulumi.String(img.Base).ToStringOutput()
	var built []*docker.Image
	var opts []pulumi.ResourceOption
	if img.Dockerfile != "" {
		b, err := docker.NewImage(d.ctx, d.n("agent", key, "base-image"), &docker.ImageArgs{
			ImageName: pulumi.String(d.ownBaseName(key)),
			SkipPush:  pulumi.Bool(true),
			Build: &docker.DockerBuildArgs{
				Context: pulumi.String(img.Context), Dockerfile: pulumi.String(img.Dockerfile),
				BuilderVersion: docker.BuilderVersionBuilderBuildKit,
			},
		}, d.parent)
		if err != nil {
			return nil, err
		}
		built = append(built, b)
		opts = append(opts, pulumi.DependsOn([]pulumi.Resource{b}))
		// By tag (FROM takes no bare image ID), and the ID as an argument of
		// its own, so a new base rebuilds the agent image.
		base = pulumi.String(d.ownBaseName(key)).ToStringOutput()
	}
	args := pulumi.StringMap{"BASE": base}
	if len(built) > 0 {
		args["BASE_ID"] = built[0].RepoDigest
	}
	agent, err := docker.NewImage(d.ctx, d.n("agent", key, "image"), &docker.ImageArgs{
		ImageName: pulumi.String(d.ownAgentName(key)),
		SkipPush:  pulumi.Bool(true),
		Build: &docker.DockerBuildArgs{
			Context:        pulumi.String(d.args.AgentContext),
			Dockerfile:     pulumi.String(d.args.AgentContext + "/Dockerfile"),
			Target:         pulumi.String("agent"),
			Args:           args,
			BuilderVersion: docker.BuilderVersionBuilderBuildKit,
		},
	}, append([]pulumi.ResourceOption{d.parent}, opts...)...)
	if err != nil {
		return nil, err
	}
	return append(built, agent), nil
}

func (d *declarer) ownBaseName(key string) string {
	return fmt.Sprintf("ai-flock/%s-agent-%s-base:latest", d.name, key)
}

func (d *declarer) ownAgentName(key string) string {
	return fmt.Sprintf("ai-flock/%s-agent-%s:latest", d.name, key)
}

// ownImageNames are the local images an agent image spec leaves behind.
func (d *declarer) ownImageNames(img flock.Image) string {
	if img.Dockerfile != "" {
		return d.ownBaseName(img.Key()) + " " + d.ownAgentName(img.Key())
	}
	return d.ownAgentName(img.Key())
}

func (d *declarer) imageName(target string) string {
	return fmt.Sprintf("ai-flock/%s-%s:latest", d.name, target)
}
