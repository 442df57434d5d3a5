// Command flock-agent is the agent that runs in every flock container, its
// healthcheck, a few built-in tools for exec tasks, and the operator CLI.
// Run `flock-agent help` for the commands.
package main

import (
	"context"
	"os"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/cmd/internal/command"
)

func main() {
	command.Main(func(ctx context.Context) int {
		return cli.Main(ctx, os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	})
}
