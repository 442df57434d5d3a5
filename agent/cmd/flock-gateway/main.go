// Command flock-gateway is the flock's model gateway: agents call model APIs
// through it with keys only it holds, each call metered against the agent's
// budget and reported on agent.<id>.usage.
//
//	flock-gateway [run]   serve (FLOCK_GATEWAY_CONFIG, or the config in
//	                      FLOCK_GATEWAY_CONFIG_DATA_PARTS/_PART_n)
//	flock-gateway health  exit 0 iff /healthz answers ok within 2 s (the
//	                      container has no shell: this is its healthcheck)
//
// SIGHUP reads the configuration and the keys again and applies them to new
// calls (calls in flight finish as they began); every agent keeps what it
// has spent. A configuration with problems is refused and the old one kept.
//
// Exit codes: 0 after SIGTERM or SIGINT (calls in flight get 10 s to end),
// 1 if it cannot serve, 2 for a bad configuration.
package main

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	// Mozilla's roots, used only when the image has none of its own (a
	// FROM scratch image): the egress broker verifies every upstream.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/ai-flock/ai-flock/agent/cmd/internal/command"
	"github.com/ai-flock/ai-flock/agent/gateway/service"
	"github.com/ai-flock/ai-flock/protocol"
)

// The gateway's environment beyond protocol's: where it listens (tests).
const (
	envAddr       = "FLOCK_GATEWAY_ADDR"
	envHealthAddr = "FLOCK_GATEWAY_HEALTH_ADDR"
)

func main() {
	command.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	healthAddr := cmp.Or(getenv(envHealthAddr), net.JoinHostPort("127.0.0.1", strconv.Itoa(protocol.GatewayHealthPort)))
	serve := func() int {
		log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "flock-gateway")
		s, err := service.Load(getenv)
		if err != nil {
			errs := protocol.Problems(err)
			for _, err := range errs {
				log.Error("bad configuration", "err", err.Error())
			}
			log.Error("not starting: the configuration has problems", "count", len(errs))
			return 2
		}
		addr := cmp.Or(getenv(envAddr), net.JoinHostPort("0.0.0.0", strconv.Itoa(protocol.GatewayPort)))
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reload := func() (*service.Setup, error) { return service.Load(getenv) }
		if err := service.Serve(ctx, s, addr, healthAddr, log, hup, reload); err != nil {
			log.Error("gateway failed", "err", err.Error())
			return 1
		}
		return 0
	}
	health := func() error { return service.Probe(healthAddr) }
	return command.Service("flock-gateway", args, stdout, stderr, serve, health)
}
