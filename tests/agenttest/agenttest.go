// Package agenttest runs real agents (worker.Run, as flock-agent runs) in a
// test's own process against a bustest bus: the tests of the agent's
// clients (the CLI, the MCP servers, agent programs) start them here, one
// way.
package agenttest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// Config is agent id's configuration as flock-agent reads it from its
// environment, for bus b and the flock's shared directory: the agent's own
// key, a status file of its own, its log on stderr and a 200 ms heartbeat;
// every other setting its default. A test changes what it needs.
func Config(t testing.TB, b *bustest.Bus, id, shared string) worker.Config {
	t.Helper()
	env := map[string]string{
		protocol.EnvAgentID: id, protocol.EnvNATSURL: b.URL, protocol.EnvSharedDir: shared,
		protocol.EnvNkeyFile: b.SeedFile(t, id), protocol.EnvHeartbeat: "200ms",
		protocol.EnvStatusFile: filepath.Join(t.TempDir(), "status"), "LOG_FILE": "-",
	}
	cfg, err := worker.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("agent %s's configuration: %v", id, err)
	}
	return cfg
}

// Run runs the agent until the test ends, then stops it and waits for it to
// drain; an error it returns fails the test. log may be nil.
func Run(t testing.TB, cfg worker.Config, log *slog.Logger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := worker.Run(ctx, cfg, log); err != nil {
			t.Errorf("agent %s: %v", cfg.ID, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}
