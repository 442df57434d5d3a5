package stacks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// flock:aws.cpuArchitecture decides every task's runtimePlatform and every
// image's platform, together: a task definition that says ARM64 runs an
// image built for linux/arm64 (whose binaries agent/Dockerfile copies from
// bin/linux-arm64/: TARGETARCH follows the platform), never the host's.
// X86_64 is the default, whatever machine deploys.
func TestAWSCPUArchitectureDecidesTasksAndImages(t *testing.T) {
	for _, tc := range []struct {
		set      string
		want     awsflock.CPUArchitecture
		platform string
	}{
		{"", awsflock.X86_64, "linux/amd64"},
		{"X86_64", awsflock.X86_64, "linux/amd64"},
		{"ARM64", awsflock.ARM64, "linux/arm64"},
	} {
		t.Run("cpuArchitecture="+tc.set, func(t *testing.T) {
			cfg := capture.Config{"flock:agentCount": "2", "flock:image": `{"base": "python:3.12-slim"}`}
			if tc.set != "" {
				cfg["flock:aws"] = `{"cpuArchitecture": "` + tc.set + `"}`
			}
			s := awsGatewayStack(t, cfg)
			tds := s.ByType(awsrules.TypeTaskDefinition)
			if len(tds) < 6 {
				t.Fatalf("%d task definitions", len(tds))
			}
			for _, td := range tds {
				rp, _ := td.Plain()["runtimePlatform"].(map[string]any)
				if rp["cpuArchitecture"] != string(tc.want) || rp["operatingSystemFamily"] != "LINUX" {
					t.Errorf("%s: runtimePlatform %v, want LINUX on %s", td.Name, rp, tc.want)
				}
			}
			imgs := s.ByType(capture.TypeImage)
			if len(imgs) < 4 {
				t.Fatalf("%d images, want the agent's, the bus's, the gateway's and the own image", len(imgs))
			}
			for _, img := range imgs {
				build, _ := img.Plain()["build"].(map[string]any)
				if build["platform"] != tc.platform {
					t.Errorf("%s: built for %v, want %s", img.Name, build["platform"], tc.platform)
				}
			}
		})
	}
	if _, err := capture.RunAWS(capture.Config{"flock:aws": `{"cpuArchitecture": "arm64"}`}); err == nil ||
		!strings.Contains(err.Error(), `flock:aws.cpuArchitecture: must be "X86_64" or "ARM64"`) {
		t.Errorf("a lower-case architecture: %v", err)
	}
}

// The stock images' tag names what they are made of: the context, the base
// image and the architecture (the repository's tags are immutable: the same
// tag for a new image would be refused at push).
func TestAWSImageTagFollowsBaseAndArchitecture(t *testing.T) {
	tag := func(aws string) string {
		s := awsStack(t, capture.Config{"flock:agentCount": "1", "flock:aws": aws})
		return awsGet(t, s, capture.TypeImage, "flock-agent-image").String("imageName")
	}
	plain, again := tag(`{}`), tag(`{}`)
	arm := tag(`{"cpuArchitecture": "ARM64"}`)
	base := tag(`{"baseImage": "gcr.io/distroless/static-debian12@sha256:0000000000000000000000000000000000000000000000000000000000000000"}`)
	if plain != again {
		t.Fatalf("the same inputs, tags %q and %q", plain, again)
	}
	if arm == plain || base == plain || arm == base {
		t.Errorf("tags: default %q, ARM64 %q, another base %q: each must differ", plain, arm, base)
	}
}

// With an agent context that is there (a real deploy from the project), the
// binaries its images copy must be built for the tasks' architecture: else
// every image build would fail midway through the deploy. Refused before
// anything is declared, naming the key and the command that fixes it.
func TestAWSMissingBinariesForTheArchitecture(t *testing.T) {
	dir := t.TempDir()
	amd := filepath.Join(dir, "bin", "linux-amd64")
	if err := os.MkdirAll(amd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range awsflock.ImageBinaries {
		if err := os.WriteFile(filepath.Join(amd, b), []byte(b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := capture.RunAWS(capture.Config{"flock:aws": `{"agentContext": "` + dir + `"}`}); err != nil {
		t.Fatalf("X86_64 with amd64 binaries: %v", err)
	}
	_, err := capture.RunAWS(capture.Config{"flock:aws": `{"agentContext": "` + dir + `", "cpuArchitecture": "ARM64"}`})
	for _, want := range []string{"flock:aws.cpuArchitecture: is ARM64, and the images' binaries for it are not built", filepath.Join(dir, "bin", "linux-arm64", "flock-agent"), "make bin ARCHS=arm64"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in: %v", want, err)
		}
	}
}
