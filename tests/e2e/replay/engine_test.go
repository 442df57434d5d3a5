package replay

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// The build context the replay sends is what the engine would get: with
// agent/.dockerignore ("*", then "!bin/linux-<arch>/<binary>" for each image's
// binary and "!bin/rootfs"), every binary an image copies, for every
// architecture, and the volume directories are in it, and nothing else is.
func TestBuildContextFollowsDockerignore(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		".dockerignore":   "*\n!bin/flock-agent\n",
		"Dockerfile":      "FROM scratch\n",
		"bin/flock-agent": "a",
		"bin/other":       "o",
		"README.md":       "r",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	if got := files(t, dir); !slices.Equal(got, []string{"Dockerfile", "bin/flock-agent"}) {
		t.Errorf("context %v: want the Dockerfile and bin/flock-agent only", got)
	}

	// The project's own: each binary the Dockerfile copies gets through.
	root, err := capture.ProjectRoot()
	if err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	raw, _ := os.ReadFile(filepath.Join(root, "agent", ".dockerignore"))
	os.WriteFile(filepath.Join(agentDir, ".dockerignore"), raw, 0o644)
	os.WriteFile(filepath.Join(agentDir, "Dockerfile"), nil, 0o644)
	var want []string
	for _, arch := range []string{"amd64", "arm64"} {
		os.MkdirAll(filepath.Join(agentDir, "bin", "linux-"+arch), 0o755)
		for _, b := range []string{"flock-agent", "flock-bus", "flock-gateway"} {
			os.WriteFile(filepath.Join(agentDir, "bin", "linux-"+arch, b), []byte(b), 0o755)
			want = append(want, "bin/linux-"+arch+"/"+b)
		}
	}
	for _, d := range []string{"tmp", "run"} {
		os.MkdirAll(filepath.Join(agentDir, "bin", "rootfs", d), 0o755)
		want = append(want, "bin/rootfs/"+d)
	}
	os.WriteFile(filepath.Join(agentDir, "bin", "stale-binary"), nil, 0o755)
	got := files(t, agentDir)
	for _, b := range want {
		if !slices.Contains(got, b) {
			t.Errorf("agent/.dockerignore keeps %s out of the build context (%v)", b, got)
		}
	}
	if slices.Contains(got, "bin/stale-binary") {
		t.Errorf("agent/.dockerignore lets bin/stale-binary into the build context (%v)", got)
	}
}

func files(t *testing.T, dir string) []string {
	r, err := tarContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}
