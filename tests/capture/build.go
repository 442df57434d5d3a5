package capture

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// GoBuild builds package pkg of the project at root into out: a static
// Linux binary for a container of this machine's architecture (the agent,
// the bus, the probe), as the images and the tests need it.
func GoBuild(root, out, pkg string) error {
	return GoBuildFor(root, out, pkg, runtime.GOARCH)
}

// GoBuildFor is GoBuild for the CPU architecture arch (a GOARCH).
func GoBuildFor(root, out, pkg, arch string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", pkg, arch, err, b)
	}
	return nil
}

// ImageBinaries are the binaries agent/Dockerfile copies (the bus image
// holds the services' too).
var ImageBinaries = []string{"flock-agent", "flock-bus", "flock-services", "flock-gateway"}

// BuildImageContext prepares agent/ as `make bin` does: the images'
// binaries for each architecture (GOARCH names; this machine's if none) in
// agent/bin/linux-<arch>/, and the directories the images declare as
// volumes, world-writable with the sticky bit, in agent/bin/rootfs/.
func BuildImageContext(root string, archs ...string) error {
	if len(archs) == 0 {
		archs = []string{runtime.GOARCH}
	}
	bin := filepath.Join(root, "agent", "bin")
	for _, arch := range archs {
		for _, b := range ImageBinaries {
			if err := GoBuildFor(root, filepath.Join(bin, "linux-"+arch, b), "./agent/cmd/"+b, arch); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"tmp", "run"} {
		p := filepath.Join(bin, "rootfs", d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		// MkdirAll's mode passes through the umask and has no sticky bit.
		if err := os.Chmod(p, 0o777|os.ModeSticky); err != nil {
			return err
		}
	}
	return nil
}
