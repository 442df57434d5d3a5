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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
)

// The gateway's environment beyond protocol's: where it listens (tests).
const (
	envAddr       = "FLOCK_GATEWAY_ADDR"
	envHealthAddr = "FLOCK_GATEWAY_HEALTH_ADDR"
)

const (
	shutdownGrace = 10 * time.Second
	healthTimeout = 2 * time.Second
)

// main is the same in every binary of the flock: SIGTERM and SIGINT cancel
// the context run works under, and run's result is the exit code.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	healthAddr := cmp.Or(getenv(envHealthAddr), net.JoinHostPort("127.0.0.1", strconv.Itoa(protocol.GatewayHealthPort)))
	cmd := "run"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "run":
		log := slog.New(slog.NewJSONHandler(stdout, nil)).With("service", "flock-gateway")
		s, errs := load(getenv)
		if errs != nil {
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
		reload := func() (*setup, []error) { return load(getenv) }
		if err := serve(ctx, s, addr, healthAddr, log, hup, reload); err != nil {
			log.Error("gateway failed", "err", err.Error())
			return 1
		}
		return 0
	case "health":
		if err := probe(healthAddr); err != nil {
			fmt.Fprintln(stderr, "unhealthy:", err)
			return 1
		}
		fmt.Fprintln(stdout, "healthy")
		return 0
	default:
		fmt.Fprintln(stderr, "usage: flock-gateway [run|health]")
		return 2
	}
}

// serve runs the gateway until ctx ends, then lets calls in flight finish.
func serve(ctx context.Context, s *setup, addr, healthAddr string, log *slog.Logger, hup <-chan os.Signal, reload func() (*setup, []error)) error {
	var (
		pub       *publisher
		ledgerBus *ledger.Bus
	)
	if s.cfg.NATSURL != "" {
		nc, err := connectBus(s.cfg.NATSURL, s.nkey, log)
		if err != nil {
			return fmt.Errorf("bus: %w", err)
		}
		pub = newPublisher(nc, log)
		defer pub.close()
		s.gw.OnUsage = pub.offer
		// Spending lives in the bus: a restart, a redeploy or a second
		// gateway continues from the same totals.
		if ledgerBus, err = ledger.NewBus(nc, log); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		s.gw.Ledger = ledgerBus
	}
	s.gw.Logger = log
	first, err := gateway.New(s.gw)
	if err != nil {
		return err
	}
	var gw atomic.Pointer[gateway.Gateway]
	gw.Store(first)
	var current atomic.Pointer[setup]
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
		"callers", s.cfg.Callers, "upstreams", len(s.cfg.Upstreams), "agents", len(s.cfg.Agents), "bus", pub.status())

wait:
	for {
		select {
		case err = <-errc:
			break wait
		case <-ctx.Done():
			break wait
		case <-hup:
			next, errs := reload()
			if errs == nil {
				next.gw.Logger, next.gw.Ledger = log, gw.Load().Ledger()
				if pub != nil {
					next.gw.OnUsage = pub.offer
				}
				var g *gateway.Gateway
				if g, err = gateway.New(next.gw); err == nil {
					gw.Store(g)
					current.Store(next)
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

// healthReport is /healthz's body.
type healthReport struct {
	Status    string `json:"status"`
	Upstreams int    `json:"upstreams"`
	Agents    int    `json:"agents"`
	Bus       string `json:"bus"` // connected, disconnected, or off (no natsUrl)
}

// healthHandler serves /healthz. A bus that is down does not make the
// gateway unhealthy: model calls do not need it.
func healthHandler(cur *atomic.Pointer[setup], pub *publisher) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s := cur.Load()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(healthReport{Status: "ok", Upstreams: len(s.cfg.Upstreams),
			Agents: len(s.cfg.Agents), Bus: pub.status()})
	})
	return mux
}

// probe asks the health endpoint at addr whether the gateway is ok.
func probe(addr string) error {
	client := &http.Client{Timeout: healthTimeout}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h healthReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&h); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || h.Status != "ok" {
		return fmt.Errorf("%s, status %q", resp.Status, h.Status)
	}
	return nil
}
