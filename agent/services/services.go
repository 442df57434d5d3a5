// Package services runs the flock's own services (the board service, the
// metrics exporter and the audit writer) as one bus client with a bus user of its own
// (protocol.ServicesUser): apart from the bus, so that a service holds only
// the permissions it needs (busconfig.ServicesPermissions) instead of the
// bus's, and listening on nothing. What the services know of the agents comes from the bus, which
// writes it into the services bucket from the topology the deploy gave it.
package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/metrics"
	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/agent/tracing"
	"github.com/ai-flock/ai-flock/protocol"
)

// Config is what the services need.
type Config struct {
	URL       string // every bus node, comma-separated
	NkeyFile  string // the services' seed file (dev), or
	Nkey      string // the seed itself (aws: from Secrets Manager)
	ReadyFile string // kept fresh while serving; "" for none
	Board     board.Options
	// NoMetrics and NoAudit leave the exporter and the audit writer off
	// (benchmarks weigh their cost; the stacks always run them).
	NoMetrics bool
	NoAudit   bool
	// Audit paces the audit writer (zero: its defaults).
	Audit audit.Config
	// Spans derives spans from the bus and publishes them for the gateway
	// to export (flock:otlp.endpoint set).
	Spans bool
	// EMF, if set, writes the metrics as CloudWatch EMF lines (the aws
	// stack); nil writes none.
	EMF    *EMF
	Logger *slog.Logger
}

// EMF is where and how the metrics are written as EMF documents.
type EMF struct {
	Level string // metrics.EMFFlock or metrics.EMFAgents
	Flock string // the Flock dimension
	Every time.Duration
	Out   io.Writer
}

// ReadyEvery is how often the ready file is rewritten while the services
// serve; ReadyMaxAge how old `flock-services health` lets it be.
const (
	ReadyEvery  = 5 * time.Second
	ReadyMaxAge = 3 * ReadyEvery
)

// retryEvery paces the waits for the bus: its buckets, its configuration.
const retryEvery = 500 * time.Millisecond

// A board whose requests wait with no worker taking one is not serving:
// past stallUnready its ready file is no longer kept fresh (its health
// check fails), past stallDead the services give up, to be started again
// (a request takes 10 s at most, so a board at work never waits so long).
const (
	stallUnready = 15 * time.Second
	stallDead    = 45 * time.Second
)

// Services is the running services.
type Services struct {
	nc      *nats.Conn
	board   *board.Service
	metrics *metrics.Exporter
	audit   *audit.Writer
	spans   *tracing.Deriver
	tap     *tap // one subscription per subject for the exporter and the writer
	log     *slog.Logger

	cfgMu  sync.Mutex
	agents map[string]protocol.BoardAgent // from the services bucket
	boardS protocol.BoardConfig           // the board's settings, without agents

	stop    context.CancelFunc
	bg      sync.WaitGroup
	watcher jetstream.KeyWatcher
	dead    chan struct{} // closed when the services can no longer serve
	once    sync.Once
}

// Start connects as the services' bus user and returns once the board
// serves: the bus's buckets exist and its configuration was read. Until
// then it waits (the bus may start after the services, or still be
// applying its topology), within ctx.
func Start(ctx context.Context, cfg Config) (*Services, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auth, err := nkeyOption(cfg)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.URL, auth,
		nats.Name("flock-services"),
		nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.ServicesUser)),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from the bus", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("reconnected to the bus", "url", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("bus error", "subject", subj, "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("services: connect: %w", err)
	}
	s, err := start(ctx, nc, cfg, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

func start(ctx context.Context, nc *nats.Conn, cfg Config, log *slog.Logger) (*Services, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("services: jetstream: %w", err)
	}
	run, stop := context.WithCancel(context.Background())
	s := &Services{nc: nc, tap: newTap(nc), log: log, stop: stop, agents: map[string]protocol.BoardAgent{}, dead: make(chan struct{})}
	loaded, err := s.watchConfig(ctx, run, js)
	if err != nil {
		stop()
		return nil, err
	}
	select {
	case <-loaded:
	case <-ctx.Done():
		s.Stop()
		return nil, fmt.Errorf("services: no configuration from the bus (bucket %s): %w", protocol.ServicesBucket, ctx.Err())
	}
	for {
		s.board, err = board.Serve(ctx, nc, js, s.BoardConfig(), log.With("component", "board"), cfg.Board)
		if err == nil {
			break
		}
		log.Info("board service not started yet: waiting for the bus", "err", err)
		if !pace.Sleep(ctx, retryEvery) {
			s.Stop()
			return nil, fmt.Errorf("services: board: %w", err)
		}
	}
	if !cfg.NoMetrics {
		s.metrics, err = metrics.Start(nc, js, metrics.Config{Agents: s.agentIDs, IsAgent: s.isAgent, Subscribe: s.tap.Subscribe,
			Board: s.board.Counts, Logger: log.With("component", "metrics")})
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("services: %w", err)
		}
		if cfg.EMF != nil {
			w, err := metrics.NewEMFWriter(s.metrics, protocol.EMFNamespace, cfg.EMF.Flock, cfg.EMF.Level)
			if err != nil {
				s.Stop()
				return nil, fmt.Errorf("services: %w", err)
			}
			s.bg.Add(1)
			go s.writeEMF(run, w, *cfg.EMF)
		}
	}
	if !cfg.NoAudit {
		ac := cfg.Audit
		ac.IsAgent, ac.Agents, ac.Subscribe, ac.Logger = s.isAgent, s.agentIDs, s.tap.Listen, log.With("component", "audit")
		for {
			var w *audit.Writer
			w, err = audit.Start(ctx, nc, js, ac)
			if err == nil {
				s.cfgMu.Lock()
				s.audit = w // the config watcher reads it
				s.cfgMu.Unlock()
				break
			}
			log.Info("audit writer not started yet: waiting for the bus", "err", err)
			if !pace.Sleep(ctx, retryEvery) {
				s.Stop()
				return nil, fmt.Errorf("services: %w", err)
			}
		}
	}
	if cfg.Spans {
		if s.spans, err = tracing.Derive(nc, tracing.DeriveConfig{Subscribe: s.tap.Subscribe, IsAgent: s.isAgent, Logger: log.With("component", "spans")}); err != nil {
			s.Stop()
			return nil, fmt.Errorf("services: spans: %w", err)
		}
	}
	// The server has every subscription before Start returns: what is
	// published after it is heard (the audit trail misses no task).
	if err := nc.FlushTimeout(10 * time.Second); err != nil && ctx.Err() == nil {
		log.Warn("the bus did not confirm the services' subscriptions", "err", err)
	}
	// Serving from here: the ready file says so before Start returns (the
	// supervisor keeps it fresh).
	if cfg.ReadyFile != "" {
		if err := writeReady(cfg.ReadyFile); err != nil {
			log.Warn("ready file not written", "file", cfg.ReadyFile, "err", err)
		}
	}
	s.bg.Add(1)
	go s.supervise(run, cfg.ReadyFile)
	log.Info("services started", "agents", len(s.agents))
	return s, nil
}

// supervise keeps the ready file fresh while the services are connected
// and the board answers its requests, and gives up when the board's view
// of its bucket stopped or its requests have waited too long.
func (s *Services) supervise(run context.Context, readyFile string) {
	defer s.bg.Done()
	t := time.NewTicker(ReadyEvery)
	defer t.Stop()
	for {
		waiting, stalled := s.board.Stalled()
		switch {
		case stalled >= stallDead:
			s.fail(fmt.Sprintf("the board is stuck: %d requests have waited %s with no worker taking one", waiting, stalled.Round(time.Second)))
			return
		case stalled >= stallUnready:
			s.log.Warn("not serving: the board's requests wait with no worker taking one", "waiting", waiting, "for", stalled.Round(time.Second).String())
		case s.nc.IsConnected() && readyFile != "":
			if err := writeReady(readyFile); err != nil {
				s.log.Warn("ready file not written", "file", readyFile, "err", err)
			}
		}
		select {
		case <-run.Done():
			return
		case <-s.board.Dead():
			s.fail("the board's view of its bucket stopped following it")
			return
		case <-t.C:
		}
	}
}

// writeEMF writes the metrics every e.Every until run ends.
func (s *Services) writeEMF(run context.Context, w *metrics.EMFWriter, e EMF) {
	defer s.bg.Done()
	pace.Every(run, e.Every, func() bool {
		if err := w.Write(e.Out, time.Now()); err != nil {
			s.log.Warn("metrics not written", "err", err)
		}
		return true
	})
}

func (s *Services) fail(why string) {
	s.log.Error("services cannot go on: " + why)
	s.once.Do(func() { close(s.dead) })
}

// Dead is closed when the services can no longer serve (a watcher ended
// under them): the process should exit and be started again.
func (s *Services) Dead() <-chan struct{} { return s.dead }

// Stop stops the board (it answers what it took), then closes the
// connection.
func (s *Services) Stop() {
	if s.spans != nil {
		s.spans.Stop()
	}
	if s.audit != nil {
		s.audit.Stop()
	}
	if s.metrics != nil {
		s.metrics.Stop()
	}
	if s.board != nil {
		s.board.Stop()
	}
	s.stop()
	s.bg.Wait()
	if s.watcher != nil {
		_ = s.watcher.Stop()
	}
	s.nc.Close()
}

func nkeyOption(cfg Config) (nats.Option, error) {
	switch {
	case cfg.Nkey != "" && cfg.NkeyFile != "":
		return nil, errors.New("services: give the nkey seed or its file, not both")
	case cfg.Nkey != "":
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(cfg.Nkey)))
		if err != nil {
			return nil, fmt.Errorf("services: nkey: %w", err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("services: nkey: %w", err)
		}
		return nats.Nkey(pub, kp.Sign), nil
	case cfg.NkeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("services: nkey file: %w", err)
		}
		return opt, nil
	}
	return nil, fmt.Errorf("services: no nkey (%s or %s)", protocol.EnvServicesNkeyFile, protocol.EnvServicesNkey)
}
