// Commands: a captured pulumi-command step run as its script.

package replay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/ai-flock/ai-flock/tests/capture"
)

func (f *Deployment) command(ctx context.Context, r capture.Resource) error {
	in := Inputs(r)
	env := map[string]string{}
	if m, ok := in["environment"].(map[string]any); ok {
		for k, v := range m {
			env[k] = Str(v)
		}
	}
	if del := Str(in["delete"]); del != "" {
		f.created = append(f.created, created{typ: r.Type, name: r.Name, script: del, env: env})
	}
	out, err := runShell(ctx, Str(in["create"]), Str(in["stdin"]), env)
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func runShell(ctx context.Context, script, stdin string, env map[string]string) (string, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
