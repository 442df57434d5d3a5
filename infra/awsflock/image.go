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
)

// ContextTag derives an image tag from the content of the build context. The
// repository's tags are immutable, so a tag must name one content: a rebuilt
// context gets a new tag, an unchanged one keeps its tag (no push, no diff).
// A missing context gives the tag of an empty one; the build then fails with
// docker's own message.
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
		if e.Type().IsRegular() {
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
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", filepath.ToSlash(rel), info.Mode().Perm(), info.Size())
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
	for i, target := range []string{"agent", "bus"} {
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
	auth := d.registryAuth
	build := &docker.DockerBuildArgs{
		Context:    pulumi.String(d.args.AgentContext),
		Dockerfile: pulumi.String(filepath.Join(d.args.AgentContext, "Dockerfile")),
		Target:     pulumi.String(target),
		Platform:   pulumi.String("linux/amd64"),
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
		Registry: docker.RegistryArgs{
			Server:   d.repo.RepositoryUrl,
			Username: auth.UserName(),
			Password: pulumi.ToSecret(auth.Password()).(pulumi.StringOutput),
		},
	}, d.parent)
}
