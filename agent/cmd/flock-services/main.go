// Command flock-services runs the flock's own services (the board service)
// as their own bus user, beside the bus. It listens on nothing.
//
//	flock-services [run]   serve (FLOCK_SERVICES_NATS_URL, and
//	                       FLOCK_SERVICES_NKEY_FILE or FLOCK_SERVICES_NKEY;
//	                       with FLOCK_SERVICES_EMF=flock|agents and
//	                       FLOCK_SERVICES_FLOCK, the metrics as CloudWatch
//	                       EMF lines on stdout every minute)
//	flock-services health  exit 0 iff the services serve: their ready file
//	                       (FLOCK_SERVICES_READY_FILE) is fresh
//
// SIGTERM or SIGINT stops the services (the board answers what it took)
// and exits 0; a service that can no longer serve exits 1, for the engine
// to start it again.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/agent/cmd/internal/command"
	"github.com/ai-flock/ai-flock/agent/services"
	"github.com/ai-flock/ai-flock/protocol"
)

func main() {
	command.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ready := cmp.Or(getenv(protocol.EnvServicesReady), protocol.ServicesReadyFile)
	serveServices := func() int {
		// One writer for the log's lines and the EMF documents', each whole.
		out := &lockedWriter{w: stdout}
		log := slog.New(slog.NewJSONHandler(out, nil)).With("service", "flock-services")
		cfg := services.Config{
			URL:       getenv(protocol.EnvServicesNATSURL),
			NkeyFile:  getenv(protocol.EnvServicesNkeyFile),
			Nkey:      getenv(protocol.EnvServicesNkey),
			ReadyFile: ready,
			Logger:    log,
		}
		if cfg.URL == "" {
			fmt.Fprintf(stderr, "flock-services: %s is required (every bus node's URL)\n", protocol.EnvServicesNATSURL)
			return 2
		}
		if cfg.NkeyFile == "" && cfg.Nkey == "" {
			cfg.NkeyFile = protocol.ServicesCredsFile
		}
		switch v := getenv(protocol.EnvServicesSpans); v {
		case "", "off":
		case "on":
			cfg.Spans = true
		default:
			fmt.Fprintf(stderr, "flock-services: %s must be on or off (got %q)\n", protocol.EnvServicesSpans, v)
			return 2
		}
		if level := getenv(protocol.EnvServicesEMF); level != "" {
			// CloudWatch Logs reads the EMF lines among the log's (aws).
			cfg.EMF = &services.EMF{Level: level, Flock: getenv(protocol.EnvServicesFlock),
				Every: protocol.EMFEverySecs * time.Second, Out: out}
		}
		if err := serve(ctx, cfg); err != nil {
			log.Error("services failed", "err", err)
			return 1
		}
		return 0
	}
	health := func() error { return services.CheckReady(ready, services.ReadyMaxAge) }
	return command.Service("flock-services", args, stdout, stderr, serveServices, health)
}

// serve runs the services until ctx ends, or until they can no longer serve.
func serve(ctx context.Context, cfg services.Config) error {
	s, err := services.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the bus
		}
		return err
	}
	defer s.Stop()
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down")
		return nil
	case <-s.Dead():
		return fmt.Errorf("services can no longer serve")
	}
}

// lockedWriter keeps the EMF documents' lines whole beside the log's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
