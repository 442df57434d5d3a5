package stacks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
)

// The Pulumi CLI refuses a project it cannot parse before it runs anything,
// and the mock engine never reads these files: load them with Pulumi's own
// loaders, so a broken file fails `go test` instead of a user's `pulumi up`.
// (Here rather than beside main.go: this package links the SDKs anyway, and
// one test binary fewer of their size saves `make test` seconds.)

// repo is the repository's root, from this package's directory.
const repo = "../.."

func TestProjectFileLoads(t *testing.T) {
	proj, err := workspace.LoadProject(filepath.Join(repo, "Pulumi.yaml"))
	if err != nil {
		t.Fatalf("Pulumi.yaml: %v", err)
	}
	if proj.Name != "ai-flock" {
		t.Errorf("Pulumi.yaml: project name %q, want ai-flock", proj.Name)
	}
	if proj.Runtime.Name() != "go" {
		t.Errorf("Pulumi.yaml: runtime %q, want go", proj.Runtime.Name())
	}
	// make program builds what the language host then finds up to date:
	// the same file, the same flags (the host's: -trimpath -ldflags '-w -s').
	target, _ := proj.Runtime.Options()["buildTarget"].(string)
	makefile, err := os.ReadFile(filepath.Join(repo, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "-buildvcs=false -trimpath -ldflags '-w -s' -o " + target + " ."; target == "" || !strings.Contains(string(makefile), want) {
		t.Errorf("Pulumi.yaml's runtime.options.buildTarget is %q: the Makefile's program target must build it with %q", target, want)
	}
}

func TestStackFilesLoad(t *testing.T) {
	proj, err := workspace.LoadProject(filepath.Join(repo, "Pulumi.yaml"))
	if err != nil {
		t.Fatalf("Pulumi.yaml: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(repo, "Pulumi.*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("want the dev and aws stack files, found %v", files)
	}
	for _, f := range files {
		stack, err := workspace.LoadProjectStack(nil, proj, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		target := ""
		for k, v := range stack.Config {
			if k.Namespace() == "flock" && k.Name() == "target" {
				target, _ = v.Value(nil)
			}
		}
		if target == "" {
			t.Errorf("%s: no flock:target", f)
		}
	}
}

func TestPolicyPackFileLoads(t *testing.T) {
	path := filepath.Join(repo, "infra", "policy", "PulumiPolicy.yaml")
	pack, err := workspace.LoadPolicyPack(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if pack.Runtime.Name() != "go" {
		t.Errorf("%s: runtime %q, want go", path, pack.Runtime.Name())
	}
	if _, err := os.Stat(filepath.Join(repo, "infra", "policy", "main.go")); err != nil {
		t.Errorf("the go policy pack runtime builds main.go beside %s: %v", path, err)
	}
}
