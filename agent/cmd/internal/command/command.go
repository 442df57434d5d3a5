// Package command is what the flock's binaries share on their command line:
// how main runs, and the `run|health` pair of the long-running services
// (flock-bus, flock-services, flock-gateway).
package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main is main in every binary of the flock: SIGTERM and SIGINT cancel the
// context run works under, and run's result is the exit code.
func Main(run func(ctx context.Context) int) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx)
	stop()
	os.Exit(code)
}

// Service runs a service's command, args[0] or "run" when there is none:
// "run" returns serve's exit code; "health" exits 0 and prints "healthy"
// when health finds nothing wrong, else 1 with "unhealthy: <why>" (the
// engine's health check runs it); anything else is a usage error, 2.
func Service(name string, args []string, stdout, stderr io.Writer, serve func() int, health func() error) int {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "run":
		return serve()
	case "health":
		if err := health(); err != nil {
			fmt.Fprintln(stderr, "unhealthy:", err)
			return 1
		}
		fmt.Fprintln(stdout, "healthy")
		return 0
	default:
		fmt.Fprintf(stderr, "usage: %s [run|health]\n", name)
		return 2
	}
}
