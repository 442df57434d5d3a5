// Package service is the model gateway as a process runs it: its
// configuration from the environment (Load, every problem named), the bus
// connection that carries usage reports and the ledger, /healthz (Probe), and
// Serve, which serves until its context ends and applies a reloaded
// configuration on SIGHUP. Command flock-gateway wires it to flags, the
// environment and signals.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/agent/tracing"
	"github.com/ai-flock/ai-flock/protocol"
)

const (
	shutdownGrace = 10 * time.Second
	healthTimeout = 2 * time.Second
)

// Serve runs the gateway until ctx ends, then lets calls in flight finish.
func Serve(ctx context.Context, s *Setup, addr, healthAddr string, log *slog.Logger, hup <-chan os.Signal, reload func() (*Setup, error)) error {
	var (
		pub       *publisher
		ledgerBus *ledger.Bus
		spans     *tracing.Exporter
		agents    atomic.Pointer[map[string]bool] // the configuration's, for the heartbeats kept
	)
	agents.Store(agentSet(s.cfg))
	if s.cfg.OTLPEndpoint != "" {
		var err error
		if spans, err = tracing.New(s.cfg.OTLPEndpoint, "flock-gateway", log); err != nil {
			return err
		}
		defer shutdownSpans(spans, log)
		s.gw.OnSpan = exportSpan(spans, log)
	}
	if s.cfg.NATSURL != "" {
		nc, err := connectBus(s.cfg.NATSURL, s.nkey, log)
		if err != nil {
			return fmt.Errorf("bus: %w", err)
		}
		running, stopRunning, err := watchRunning(nc, func(id string) bool { return (*agents.Load())[id] })
		if err != nil {
			return fmt.Errorf("bus: %s: %w", protocol.SubjectHeartbeats, err)
		}
		defer stopRunning()
		s.gw.TaskTrace = running.trace
		if spans != nil {
			stop, err := tracing.Relay(nc, spans, log)
			if err != nil {
				return fmt.Errorf("bus: %s: %w", protocol.SpansSubject, err)
			}
			defer stop()
		}
		pub = newPublisher(nc, log)
		defer pub.close()
		s.gw.OnUsage = pub.offer
		s.onEgress = pub.offerEgress
		// Spending lives in the bus: a restart, a redeploy or a second
		// gateway continues from the same totals.
		if ledgerBus, err = ledger.NewBus(nc, log); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		s.gw.Ledger = ledgerBus
	}
	s.gw.Logger = log
	first, err := s.handler(log)
	if err != nil {
		return err
	}
	var gw atomic.Pointer[gateway.Handler]
	gw.Store(first)
	var current atomic.Pointer[Setup]
	current.Store(s)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Each agent (its address) holds its share of connections, no more:
	// thousands of idle ones from one agent must not exhaust the
	// descriptors the others' calls need.
	ln = gateway.LimitPeers(ln, gateway.DefaultMaxConnsPerPeer, log)
	hln, err := net.Listen("tcp", healthAddr)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gw.Load().ServeHTTP(w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: a stream lasts as long as the model writes.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	health := &http.Server{Handler: healthHandler(&current, pub), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() { errc <- health.Serve(hln) }()
	log.Info("listening", "addr", ln.Addr().String(), "health_addr", hln.Addr().String(),
		"callers", s.cfg.Callers, "upstreams", len(s.cfg.Upstreams), "agents", len(s.cfg.Agents), "bus", pub.status(),
		"egress_rules", s.egressRules())

wait:
	for {
		select {
		case err = <-errc:
			break wait
		case <-ctx.Done():
			break wait
		case <-hup:
			next, rerr := reload()
			errs := protocol.Problems(rerr)
			if rerr == nil {
				next.gw.Logger, next.gw.Ledger = log, gw.Load().Ledger()
				if pub != nil {
					next.gw.OnUsage, next.onEgress = pub.offer, pub.offerEgress
				}
				next.gw.OnSpan, next.gw.TaskTrace = s.gw.OnSpan, s.gw.TaskTrace
				if next.cfg.OTLPEndpoint != s.cfg.OTLPEndpoint {
					log.Warn("otlpEndpoint changed: the gateway exports to the new one when it restarts", "in_use", s.cfg.OTLPEndpoint != "")
				}
				var g *gateway.Handler
				if g, err = next.handler(log); err == nil {
					gw.Store(g)
					current.Store(next)
					agents.Store(agentSet(next.cfg))
					log.Info("reloaded", "upstreams", len(next.cfg.Upstreams), "agents", len(next.cfg.Agents))
					continue
				}
				errs = []error{err}
			}
			for _, e := range errs {
				log.Error("reload refused: keeping the configuration in use", "err", e.Error())
			}
			err = nil
		}
	}
	log.Info("shutting down: no new calls; calls in flight get the grace period", "grace", shutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("grace period over: closing the calls still open", "err", serr.Error())
		srv.Close()
	}
	health.Close()
	if ledgerBus != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if derr := ledgerBus.Drain(dctx); derr != nil {
			log.Warn("stopping with costs not written to the ledger: those calls stay charged their bound", "err", derr.Error())
		}
		cancel()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

func agentSet(c protocol.GatewayConfig) *map[string]bool {
	set := make(map[string]bool, len(c.Agents))
	for _, a := range c.Agents {
		set[a.ID] = true
	}
	return &set
}

// handler is the gateway of s, with its egress broker when it has rules.
func (s *Setup) handler(log *slog.Logger) (*gateway.Handler, error) {
	if s.egress != nil {
		b, err := s.egress.newBroker(log, s.onEgress, s.gw.Ledger)
		if err != nil {
			return nil, err
		}
		s.gw.Egress = b
	}
	return gateway.New(s.gw)
}

func (s *Setup) egressRules() int {
	if s.egress == nil {
		return 0
	}
	return len(s.egress.rules.Rules())
}
