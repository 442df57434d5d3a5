package capture

import (
	"fmt"
	"os"
	"os/exec"
)

// GoBuild builds package pkg of the project at root into out: a static
// Linux binary for a container of this machine's architecture (the agent,
// the bus, the probe), as the images and the tests need it.
func GoBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
