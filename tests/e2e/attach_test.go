package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// attachDeployed describes a flock deployed by a real `pulumi up` (layer 3
// of the testing layers): the probes then run against what Pulumi and the
// docker provider created, not a replay. It needs the Pulumi CLI, the stack
// (FLOCK_E2E_STACK, default dev) and root on the Docker host (the probe is
// copied into the agents' directories). Nothing is torn down afterwards.
func attachDeployed(ctx context.Context, engine *replay.Engine) (*flockUnderTest, error) {
	stack := os.Getenv("FLOCK_E2E_STACK")
	if stack == "" {
		stack = "dev"
	}
	out, err := stackOutputs(ctx, stack)
	if err != nil {
		return nil, err
	}
	var outputs struct {
		BusURL       string `json:"busUrl"`
		SharedRoot   string `json:"sharedRoot"`
		OperatorSeed string `json:"operatorSeed"`
		Agents       []struct {
			ID  string `json:"id"`
			UID int    `json:"uid"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(out, &outputs); err != nil {
		return nil, fmt.Errorf("stack outputs: %w", err)
	}
	name := "flock"
	if n := os.Getenv("FLOCK_E2E_NAME"); n != "" {
		name = n
	} else if n, err := exec.CommandContext(ctx, "pulumi", "config", "get", "flock:name", "-s", stack).Output(); err == nil && len(n) > 0 {
		name = string(n[:len(n)-1])
	}
	if len(outputs.Agents) < 2 {
		return nil, fmt.Errorf("stack %s has %d agents; the probes need at least 2", stack, len(outputs.Agents))
	}
	f := &flockUnderTest{name: name, sharedRoot: outputs.SharedRoot, uids: map[string]int{}, seed: outputs.OperatorSeed,
		busURL: outputs.BusURL, engine: engine, probe: map[string]string{}, heartbeat: 30 * time.Second}
	for _, a := range outputs.Agents {
		f.agents = append(f.agents, a.ID)
		f.uids[a.ID] = a.UID
	}
	root, _ = os.Getwd()
	for root != "/" {
		if _, err := os.Stat(filepath.Join(root, "Pulumi.yaml")); err == nil {
			break
		}
		root = filepath.Dir(root)
	}
	probeBin := os.Getenv("FLOCK_E2E_PROBE") // built elsewhere: the VM has no Go
	if probeBin == "" {
		probeBin = filepath.Join(os.TempDir(), "flock-e2e-probe")
		if err := goBuild(probeBin, "./tests/e2e/probe"); err != nil {
			return nil, err
		}
	}
	for _, id := range f.agents[:2] {
		if err := f.installProbe(probeBin, id); err != nil {
			return nil, err
		}
	}
	if err := f.waitForHeartbeats(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	return f, nil
}

// stackOutputs are the outputs of the deployed stack, as `pulumi stack output
// --json --show-secrets` prints them, or read from FLOCK_E2E_OUTPUTS (the same
// document, written where the flock was deployed from, for probes that run
// on a machine without the Pulumi CLI, the VM).
func stackOutputs(ctx context.Context, stack string) ([]byte, error) {
	if p := os.Getenv("FLOCK_E2E_OUTPUTS"); p != "" {
		return os.ReadFile(p)
	}
	out, err := exec.CommandContext(ctx, "pulumi", "stack", "output", "--json", "--show-secrets", "-s", stack).Output()
	if err != nil {
		return nil, fmt.Errorf("pulumi stack output -s %s: %w", stack, err)
	}
	return out, nil
}
