package fargate

import (
	"context"
	"os"
	"path/filepath"

	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// buildPause builds the pause image (FROM scratch, one static binary) in a
// context under work.
func buildPause(ctx context.Context, e *replay.Engine, root, work string) (string, error) {
	dir := filepath.Join(work, "pause-image")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := capture.GoBuild(root, filepath.Join(dir, "pause"), "./tests/fargate/pause"); err != nil {
		return "", err
	}
	df := "FROM scratch\nCOPY pause /pause\nUSER 65534:65534\nENTRYPOINT [\"/pause\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return "", err
	}
	return e.Build(ctx, dir, "Dockerfile", "", "flock-fargate/pause:latest", nil, map[string]string{Label: "1", replay.RunLabel: "1"})
}
