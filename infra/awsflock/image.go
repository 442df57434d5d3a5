package awsflock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecr"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// ContextTag derives an image tag from the content of the build context. The
// repository's tags are immutable, so a tag must name one content: a rebuilt
// context gets a new tag, an unchanged one keeps its tag (no push, no diff).
// A missing context gives the tag of an empty one; the build then fails with
// docker's own message. ImageTag adds what else goes into an image.
func ContextTag(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		// Directories count too: the images copy bin/rootfs' (their modes
		// are what Fargate's task volumes start with).
		if e.Type().IsRegular() || (e.IsDir() && p != dir) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash build context %s: %w", dir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("hash build context: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", filepath.ToSlash(rel), info.Mode()&(fs.ModePerm|fs.ModeSticky), info.Size())
		if info.IsDir() {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return "", fmt.Errorf("hash build context: %w", err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash build context: %w", err)
		}
	}
	return "c" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// ImageTag tags the stock images: the build context's content (ContextTag),
// the base image they are built FROM (flock:aws.baseImage; "" is the
// Dockerfile's default) and the architecture they are built for. A new
// base or architecture is a new image, and the repository's tags are
// immutable: the same tag for it would be refused at push. (A base named by
// a mutable tag, such as the default's :nonroot, is the same reference when
// its publisher moves it: pin it by digest to get a new tag then.)
func ImageTag(agentContext, base string, a CPUArchitecture) (string, error) {
	ctx, err := ContextTag(agentContext)
	if err != nil {
		return "", err
	}
	return "c" + digest("ai-flock/image/v2", ctx, base, string(a)), nil
}

// repository declares the flock's ECR repository: images scanned on push,
// tags immutable, old images expired so the repository does not grow forever.
func (d *declarer) repository() error {
	var err error
	d.repo, err = ecr.NewRepository(d.ctx, d.n("images"), &ecr.RepositoryArgs{
		ImageTagMutability:         pulumi.String("IMMUTABLE"),
		ImageScanningConfiguration: ecr.RepositoryImageScanningConfigurationArgs{ScanOnPush: pulumi.Bool(true)},
		EncryptionConfigurations: ecr.RepositoryEncryptionConfigurationArray{
			ecr.RepositoryEncryptionConfigurationArgs{EncryptionType: pulumi.String("AES256")},
		},
		// pulumi destroy removes the images with the repository.
		ForceDelete: pulumi.Bool(true),
		Tags:        d.tags("images", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("repository: %w", err)
	}
	d.registryAuth = ecr.GetAuthorizationTokenOutput(d.ctx, ecr.GetAuthorizationTokenOutputArgs{
		RegistryId: d.repo.RegistryId,
	}, d.invoke)
	rules := []map[string]any{}
	targets := []string{"agent", "bus"}
	if d.m.Gateway.Enabled() {
		targets = append(targets, "gateway")
	}
	for i, target := range targets {
		rules = append(rules, map[string]any{
			"rulePriority": i + 1,
			"description":  "keep the last 10 " + target + " images",
			"selection": map[string]any{
				"tagStatus": "tagged", "tagPrefixList": []string{target + "-"},
				"countType": "imageCountMoreThan", "countNumber": 10,
			},
			"action": map[string]any{"type": "expire"},
		})
	}
	// Each own image keeps its last 10 under a prefix of its own: no image
	// of the stock images' rules, or of another own image, ever counts
	// against it, so however many images the flock has, none in use expires.
	for _, img := range ownImages(d.m) {
		rules = append(rules, map[string]any{
			"rulePriority": len(rules) + 1,
			"description":  "keep the last 10 images of agent image " + img.Key(),
			"selection": map[string]any{
				"tagStatus": "tagged", "tagPrefixList": []string{ownTagPrefix(img.Key())},
				"countType": "imageCountMoreThan", "countNumber": 10,
			},
			"action": map[string]any{"type": "expire"},
		})
	}
	if _, err = ecr.NewLifecyclePolicy(d.ctx, d.n("images-lifecycle"), &ecr.LifecyclePolicyArgs{
		Repository: d.repo.Name,
		Policy:     pulumi.String(mustJSON(map[string]any{"rules": rules})),
	}, d.parent); err != nil {
		return fmt.Errorf("repository lifecycle: %w", err)
	}
	return nil
}

// image builds one target of the agent Dockerfile and pushes it to the
// repository with a short-lived token from ECR (never stored in config).
func (d *declarer) image(target string) (*docker.Image, error) {
	build := &docker.DockerBuildArgs{
		Context:    pulumi.String(d.args.AgentContext),
		Dockerfile: pulumi.String(filepath.Join(d.args.AgentContext, "Dockerfile")),
		Target:     pulumi.String(target),
		Platform:   pulumi.String(d.args.CPUArchitecture.Platform()),
		// BuildKit: the provider's legacy builder never asks the engine to
		// remove its intermediate containers, so each build left one per
		// Dockerfile step behind; BuildKit leaves none and builds only the target.
		BuilderVersion: docker.BuilderVersionBuilderBuildKit,
	}
	if d.args.BaseImage != "" {
		build.Args = pulumi.StringMap{"BASE": pulumi.String(d.args.BaseImage)}
	}
	return docker.NewImage(d.ctx, d.n(target, "image"), &docker.ImageArgs{
		ImageName: pulumi.Sprintf("%s:%s-%s", d.repo.RepositoryUrl, target, d.args.ImageTag),
		Build:     build,
		Registry:  d.registry(),
	}, d.parent)
}

// registry is the flock's repository with a short-lived token from ECR.
func (d *declarer) registry() docker.RegistryArgs {
	auth := d.registryAuth
	return docker.RegistryArgs{
		Server:   d.repo.RepositoryUrl,
		Username: auth.UserName(),
		Password: pulumi.ToSecret(auth.Password()).(pulumi.StringOutput),
	}
}

// CPUArchitecture is a Fargate task's CPU architecture
// (runtimePlatform.cpuArchitecture), flock:aws.cpuArchitecture.
type CPUArchitecture string

// The architectures Fargate runs Linux tasks on.
const (
	X86_64 CPUArchitecture = "X86_64"
	ARM64  CPUArchitecture = "ARM64"
)

// DefaultCPUArchitecture is Fargate's own default.
const DefaultCPUArchitecture = X86_64

// GOARCH is the Go (and Docker) name of the architecture: the binaries of
// its images are agent/bin/linux-<GOARCH>/.
func (a CPUArchitecture) GOARCH() string {
	if a == ARM64 {
		return "arm64"
	}
	return "amd64"
}

// Platform is what the images of tasks on a are built for: the
// task definitions' runtimePlatform says the same, and the binaries in the
// image are built for it (agent/Dockerfile copies bin/linux-$TARGETARCH/).
func (a CPUArchitecture) Platform() string { return "linux/" + a.GOARCH() }

// Platform is the default architecture's (X86_64) platform.
const Platform = "linux/amd64"

// BinaryDir is where the images' binaries for a are in the build context.
func BinaryDir(agentContext string, a CPUArchitecture) string {
	return filepath.Join(agentContext, "bin", "linux-"+a.GOARCH())
}

// ImageBinaries are the binaries agent/Dockerfile copies (the bus image
// holds the services' too).
var ImageBinaries = []string{"flock-agent", "flock-bus", "flock-services", "flock-gateway"}

// binaryErrors: with a build context that exists, every binary its images
// copy must be there for the tasks' architecture, or every image build
// would fail midway through a deploy. A context that does not exist is left
// to the build (docker names it).
func binaryErrors(agentContext string, a CPUArchitecture) []string {
	if _, err := os.Stat(agentContext); err != nil {
		return nil
	}
	var missing []string
	for _, b := range ImageBinaries {
		if _, err := os.Stat(filepath.Join(BinaryDir(agentContext, a), b)); err != nil {
			missing = append(missing, filepath.Join(BinaryDir(agentContext, a), b))
		}
	}
	return missing
}

// OwnImagePrefix starts the tag of every agent's own image in the
// repository. No stock image's tag (agent-, bus-, gateway-) starts so, and
// each own image's tags start with a prefix of their own (own-<key>-), so
// the lifecycle rules of one never count another's images.
const OwnImagePrefix = "own-"

// MaxOwnImages bounds the distinct own images of a flock on aws: each has a
// lifecycle rule of its own, and a repository's lifecycle policy holds at
// most 30,720 characters.
const MaxOwnImages = 100

func ownTagPrefix(key string) string { return OwnImagePrefix + key + "-" }

// OwnImageTags tag an agent's own image.
type OwnImageTags struct {
	// Agent is its tag in the repository: own-<key>-<digest of the agent
	// context's tag and of the base image, or of the user's build>.
	Agent string
	// Base tags the user's build (a Dockerfile's image; "" with a base
	// image): local only, never pushed; the agent image is built FROM it.
	Base string
}

// TagOwnImage derives the tags of an agent's own image from what it is made
// of: the agent context (agentTag, the stock images' tag) and the base
// image's reference, or the content of the user's Dockerfile and context.
// The repository's tags are immutable, so a tag names one content: a
// changed Dockerfile, context or agent context gets a new tag, an unchanged
// one keeps its tag (no build, no push).
func TagOwnImage(img flock.Image, agentTag string) (OwnImageTags, error) {
	var t OwnImageTags
	from := "base\x00" + img.Base
	if img.Dockerfile != "" {
		ctx, err := ContextTag(img.Context)
		if err != nil {
			return t, err
		}
		df, err := os.ReadFile(img.Dockerfile)
		if err != nil {
			return t, fmt.Errorf("hash %s: %w", img.Dockerfile, err)
		}
		t.Base = "b" + digest("ai-flock/own-image-base/v1", img.Dockerfile, string(df), ctx)
		from = "build\x00" + t.Base
	}
	t.Agent = ownTagPrefix(img.Key()) + digest("ai-flock/own-image/v1", agentTag, from)
	return t, nil
}

// ownImages are the flock's own images, one per distinct spec (Key), in
// the order agents first name them.
func ownImages(m flock.Model) []flock.Image {
	var out []flock.Image
	seen := map[string]bool{}
	for _, a := range m.Agents {
		if key := a.Image.Key(); key != "" && !seen[key] {
			seen[key] = true
			out = append(out, a.Image)
		}
	}
	return out
}

// ownImage builds an agent's own image and pushes it like the stock ones:
// the user's Dockerfile first, when they gave one (built here, for the
// same platform, and not pushed), then the agent target of the agent
// Dockerfile on top of it or of their base image (BASE), which adds
// flock-agent as the entrypoint and its healthcheck. The user's build goes
// in by its local tag (FROM takes no bare image ID), with its ID as an
// argument of its own (BASE_ID), so a new base rebuilds the agent image.
func (d *declarer) ownImage(img flock.Image) (*docker.Image, error) {
	key, tags := img.Key(), d.args.OwnImages[img.Key()]
	build := &docker.DockerBuildArgs{
		Context:        pulumi.String(d.args.AgentContext),
		Dockerfile:     pulumi.String(filepath.Join(d.args.AgentContext, "Dockerfile")),
		Target:         pulumi.String("agent"),
		Platform:       pulumi.String(d.args.CPUArchitecture.Platform()),
		BuilderVersion: docker.BuilderVersionBuilderBuildKit,
		Args:           pulumi.StringMap{"BASE": pulumi.String(img.Base)},
	}
	opts := []pulumi.ResourceOption{d.parent}
	if img.Dockerfile != "" {
		name := fmt.Sprintf("ai-flock/%s-agent-%s-base:%s", d.name, key, tags.Base)
		base, err := docker.NewImage(d.ctx, d.n("agent", key, "base-image"), &docker.ImageArgs{
			ImageName: pulumi.String(name),
			SkipPush:  pulumi.Bool(true),
			Build: &docker.DockerBuildArgs{
				Context: pulumi.String(img.Context), Dockerfile: pulumi.String(img.Dockerfile),
				Platform:       pulumi.String(d.args.CPUArchitecture.Platform()),
				BuilderVersion: docker.BuilderVersionBuilderBuildKit,
			},
		}, d.parent)
		if err != nil {
			return nil, err
		}
		build.Args = pulumi.StringMap{"BASE": pulumi.String(name), "BASE_ID": base.RepoDigest}
		opts = append(opts, pulumi.DependsOn([]pulumi.Resource{base}))
	}
	return docker.NewImage(d.ctx, d.n("agent", key, "image"), &docker.ImageArgs{
		ImageName: pulumi.Sprintf("%s:%s", d.repo.RepositoryUrl, tags.Agent),
		Build:     build,
		Registry:  d.registry(),
	}, opts...)
}
