// Command flock-agent is the agent that runs in every flock container, its
// healthcheck, a few built-in tools for exec tasks, and the operator CLI.
// Run `flock-agent help` for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ai-flock/ai-flock/agent/cli"
)

// main is the same in every binary of the flock: SIGTERM and SIGINT cancel
// the context run works under, and run's result is the exit code.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := cli.Main(ctx, os.Args[1:], os.Getenv, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
