// Package agentcli lets a test binary double as flock-agent.
package agentcli

import (
	"context"
	"os"
	"testing"

	"github.com/ai-flock/ai-flock/agent/cli"
)

// Main is a TestMain: with env set to "1" the test binary runs as
// flock-agent (cli.Main on its arguments, stdin and stdout) and exits with
// its code; otherwise it runs the tests.
func Main(m *testing.M, env string) {
	if os.Getenv(env) == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Exit(m.Run())
}
