// Images: a captured docker.Image built on the engine.

package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ai-flock/ai-flock/tests/capture"
)

func (f *Deployment) image(ctx context.Context, r capture.Resource) error {
	id, err := BuildImage(ctx, f.Engine, f.Root, r)
	if err != nil {
		return err
	}
	f.Images[capture.MockDigest(r.Name)] = id
	return nil
}

// BuildImage builds a captured docker.Image resource on the engine as the
// docker provider would (its context, Dockerfile, target and arguments,
// relative paths from the project root) and returns the image's ID.
func BuildImage(ctx context.Context, e *Engine, root string, r capture.Resource) (string, error) {
	in := Inputs(r)
	b, _ := in["build"].(map[string]any)
	dir := Str(b["context"])
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	// The engine wants the Dockerfile relative to the context.
	dockerfile := Str(b["dockerfile"])
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(root, dockerfile)
	}
	dockerfile, err := filepath.Rel(dir, dockerfile)
	if err != nil || strings.HasPrefix(dockerfile, "..") {
		return "", fmt.Errorf("dockerfile %q is outside the build context %s", Str(b["dockerfile"]), dir)
	}
	args := map[string]string{}
	if a, ok := b["args"].(map[string]any); ok {
		for k, v := range a {
			args[k] = Str(v)
		}
	}
	// BuildKit (the provider's builder) sets TARGETARCH from the build's
	// platform, or the engine's own; the legacy builder the replay drives
	// takes it as an argument.
	if _, ok := args["TARGETARCH"]; !ok {
		if args["TARGETARCH"], err = targetArch(ctx, e, Str(b["platform"])); err != nil {
			return "", err
		}
	}
	return e.Build(ctx, dir, dockerfile, Str(b["target"]), Str(in["imageName"]), args, map[string]string{RunLabel: "1"})
}

// targetArch is the architecture a build for platform ("os/arch", or ""
// for the engine's own) gets as TARGETARCH. The legacy builder cannot make
// an image for another platform: such a build fails loudly.
func targetArch(ctx context.Context, e *Engine, platform string) (string, error) {
	own, err := e.Arch(ctx)
	if err != nil {
		return "", err
	}
	if platform == "" {
		return own, nil
	}
	_, arch, ok := strings.Cut(platform, "/")
	if !ok || arch != own {
		return "", fmt.Errorf("platform %q: the replay builds for the engine's own platform only (linux/%s)", platform, own)
	}
	return arch, nil
}
