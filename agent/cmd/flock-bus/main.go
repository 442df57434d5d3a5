// Command flock-bus is the flock's message bus: nats-server embedded, loaded
// from the rendered config and topology files.
//
//	flock-bus [run]   run the bus (FLOCK_BUS_CONFIG, FLOCK_BUS_TOPOLOGY)
//	flock-bus health  exit 0 iff NATS answers on 127.0.0.1:4222 within 2 s
//
// SIGHUP re-reads both files and applies them without a restart; SIGTERM or
// SIGINT shuts down gracefully and exits 0.
package main

import (
	"context"
	"fmt"
	"github.com/ai-flock/ai-flock/protocol"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/agent/bus"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "run":
		return serve()
	case "health":
		addr := env("FLOCK_BUS_HEALTH_ADDR", net.JoinHostPort("127.0.0.1", strconv.Itoa(protocol.ClientPort)))
		if err := bus.Probe(addr, 2*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "unhealthy:", err)
			return 1
		}
		fmt.Println("healthy")
		return 0
	default:
		fmt.Fprintf(os.Stderr, "usage: flock-bus [run|health]\n")
		return 2
	}
}

func serve() int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("service", "flock-bus")
	cfg := bus.Config{
		ConfigFile:   env("FLOCK_BUS_CONFIG", protocol.BusConfigFile),
		TopologyFile: env("FLOCK_BUS_TOPOLOGY", protocol.BusTopologyFile),
		Logger:       log,
	}
	// On Fargate the rendered files arrive as secret environment parts
	// (FLOCK_BUS_CONFIG_PARTS ...): write them to the task's /run volume.
	if conf, topo, ok, err := bus.Materialize(protocol.BusRuntimeDir, os.Getenv); err != nil {
		log.Error("bus config from the environment", "err", err)
		return 1
	} else if ok {
		cfg.ConfigFile, cfg.TopologyFile = conf, topo
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	s, err := bus.Start(ctx, cfg)
	cancel()
	if err != nil {
		log.Error("bus failed to start", "err", err)
		return 1
	}
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			if err := s.Reload(ctx); err != nil {
				log.Error("reload failed: keeping the running configuration", "err", err)
			}
			cancel()
			continue
		}
		log.Info("shutting down", "signal", sig.String())
		s.Shutdown()
		return 0
	}
	return 0
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
