// Command flock-bus is the flock's message bus: nats-server embedded, loaded
// from the rendered config and topology files.
//
//	flock-bus [run]   run the bus (FLOCK_BUS_CONFIG, FLOCK_BUS_TOPOLOGY; with
//	                  FLOCK_BUS_METRICS_LISTEN, relay the services' metrics
//	                  on http://<it>/metrics)
//	flock-bus health  exit 0 iff NATS answers on 127.0.0.1:4222 within 2 s
//	                  and the bus says it is healthy (its ready file is fresh:
//	                  a cluster node is current with the cluster)
//
// SIGHUP re-reads both files and applies them without a restart; SIGTERM or
// SIGINT shuts down gracefully and exits 0.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/agent/bus"
	"github.com/ai-flock/ai-flock/agent/cmd/internal/command"
	"github.com/ai-flock/ai-flock/protocol"
)

func main() {
	command.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	readyFile := cmp.Or(getenv("FLOCK_BUS_READY_FILE"), protocol.BusReadyFile)
	serveBus := func() int {
		log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "flock-bus")
		cfg := bus.Config{
			ConfigFile:   cmp.Or(getenv("FLOCK_BUS_CONFIG"), protocol.BusConfigFile),
			TopologyFile: cmp.Or(getenv("FLOCK_BUS_TOPOLOGY"), protocol.BusTopologyFile),
			Logger:       log,
		}
		if err := serve(ctx, cfg, readyFile, getenv); err != nil {
			log.Error("bus failed", "err", err)
			return 1
		}
		return 0
	}
	health := func() error {
		addr := cmp.Or(getenv("FLOCK_BUS_HEALTH_ADDR"), net.JoinHostPort("127.0.0.1", strconv.Itoa(protocol.ClientPort)))
		if err := bus.Probe(addr, 2*time.Second); err != nil {
			return err
		}
		return bus.CheckReady(readyFile, bus.ReadyMaxAge)
	}
	return command.Service("flock-bus", args, stdout, stderr, serveBus, health)
}

// serve runs the bus until ctx ends; SIGHUP reloads its files.
func serve(ctx context.Context, cfg bus.Config, readyFile string, getenv func(string) string) error {
	// On Fargate the rendered files arrive as secret environment parts
	// (FLOCK_BUS_CONFIG_PARTS ...): write them to the task's /run volume.
	if conf, topo, ok, err := bus.Materialize(protocol.BusRuntimeDir, getenv); err != nil {
		return fmt.Errorf("bus config from the environment: %w", err)
	} else if ok {
		cfg.ConfigFile, cfg.TopologyFile = conf, topo
	}
	hup := make(chan os.Signal, 4)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	s, err := bus.Start(startCtx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if addr := getenv(protocol.EnvBusMetricsListen); addr != "" {
		if _, err := s.ServeMetrics(ctx, addr); err != nil {
			s.Shutdown()
			return err
		}
	}
	readyCtx, stopReady := context.WithCancel(ctx)
	readyDone := make(chan struct{})
	go func() { s.WriteReady(readyCtx, readyFile); close(readyDone) }()
	defer func() { stopReady(); <-readyDone }()
	for {
		select {
		case <-hup:
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			if err := s.Reload(rctx); err != nil {
				cfg.Logger.Error("reload failed: keeping the running configuration", "err", err)
			}
			cancel()
		case <-ctx.Done():
			cfg.Logger.Info("shutting down")
			s.Shutdown()
			return nil
		}
	}
}
