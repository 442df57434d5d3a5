// Package bustest starts a real flock bus for tests and benchmarks: it
// validates a flock model, derives every user's nkey from a fixed master
// secret, renders the NATS config and the JetStream topology exactly as the
// stacks do, and starts the bus from those files on a random port with a
// temporary store, and the flock's services (the board) beside it as their
// own bus user, as the stacks run them.
package bustest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/bus"
	"github.com/ai-flock/ai-flock/agent/services"
	"github.com/ai-flock/ai-flock/infra/busconfig"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Master is the fixed master secret tests derive credentials from.
var Master = []byte("ai-flock-test-master-secret-0123456789")

// Bus is a test bus: a rendered flock model with its bus running (one
// node, or three with StartCluster).
type Bus struct {
	Dir          string // holds the rendered files, seeds and the store
	ConfigFile   string
	TopologyFile string
	Model        flock.Model
	Bus          *bus.Server
	URL          string
	// Services are the flock's services (the board), connected to every
	// node as protocol.ServicesUser; nil WithoutServices.
	Services    *services.Services
	logger      *slog.Logger
	master      []byte // what every key is derived from (Master unless started WithMaster)
	agentMaster []byte // what agents' keys are derived from (master until RotateAgentKeys)
	cfg         flock.Config

	// A three-node bus (StartCluster): Bus is node 1, URL lists every node.
	Nodes []*Node
	// BootstrapGrace is given to nodes started from now on (0: the bus's default).
	BootstrapGrace time.Duration

	opts options
}

// Option changes how a test bus starts.
type Option func(*options)

type options struct {
	board      board.Options
	noServices bool
	noMetrics  bool
	noAudit    bool
	audit      audit.Config
	spans      bool
}

// WithBoard gives the board service its options: a test's clock, a fast
// sweep.
func WithBoard(o board.Options) Option { return func(c *options) { c.board = o } }

// WithoutServices starts the bus alone (StartServices starts them later).
func WithoutServices() Option { return func(c *options) { c.noServices = true } }

// WithoutMetrics starts the services with their exporter off.
func WithoutMetrics() Option { return func(c *options) { c.noMetrics = true } }

// WithoutAudit starts the services with their audit writer off.
func WithoutAudit() Option { return func(c *options) { c.noAudit = true } }

// WithSpans has the services derive spans and publish them on
// protocol.SpansSubject (flock:otlp.endpoint set).
func WithSpans() Option { return func(c *options) { c.spans = true } }

// WithAudit paces the audit writer (a test's clock, fast anchors).
func WithAudit(c audit.Config) Option { return func(o *options) { o.audit = c } }

// Agents returns a flock.Config of n agents (agent-1 … agent-n) on the docker target.
func Agents(n int) flock.Config {
	return flock.Config{Target: "docker", AgentCount: &n}
}

// New renders cfg into dir and starts its bus (random port, store in dir).
// Close stops it. logger may be nil.
func New(dir string, cfg flock.Config, logger *slog.Logger, opts ...Option) (*Bus, error) {
	return newWithMaster(dir, cfg, logger, Master, opts...)
}

func newWithMaster(dir string, cfg flock.Config, logger *slog.Logger, master []byte, opts ...Option) (*Bus, error) {
	f := &Bus{Dir: dir, ConfigFile: filepath.Join(dir, "nats.conf"), TopologyFile: filepath.Join(dir, "topology.json"), master: master, agentMaster: master}
	for _, o := range opts {
		o(&f.opts)
	}
	if err := f.render(cfg); err != nil {
		return nil, err
	}
	f.logger = logger
	b, err := f.startBus(-1)
	if err != nil {
		return nil, err
	}
	f.Bus, f.URL = b, b.ClientURL()
	if !f.opts.noServices {
		if err := f.startServices(); err != nil {
			b.Shutdown()
			return nil, err
		}
	}
	return f, nil
}

// startServices starts the flock's services on every node's URL, as
// protocol.ServicesUser, and waits until the board serves.
func (f *Bus) startServices() error {
	seed, err := f.WriteSeed(protocol.ServicesUser)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := f.logger
	if log != nil {
		log = log.With("component", "services")
	}
	s, err := services.Start(ctx, services.Config{URL: f.URL, NkeyFile: seed, Board: f.opts.board, NoMetrics: f.opts.noMetrics,
		NoAudit: f.opts.noAudit, Audit: f.opts.audit, Spans: f.opts.spans, Logger: log})
	if err != nil {
		return fmt.Errorf("start the flock's services: %w", err)
	}
	f.Services = s
	return nil
}

// StartServices starts the flock's services (after WithoutServices, or
// after StopServices).
func (f *Bus) StartServices(tb testing.TB) {
	tb.Helper()
	if err := f.startServices(); err != nil {
		tb.Fatal(err)
	}
}

// StopServices stops the flock's services (the board stops answering).
func (f *Bus) StopServices() {
	if f.Services != nil {
		f.Services.Stop()
		f.Services = nil
	}
}

// startBus starts the single bus on port (-1: any free port).
func (f *Bus) startBus(port int) (*bus.Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return bus.Start(ctx, bus.Config{
		ConfigFile: f.ConfigFile, TopologyFile: f.TopologyFile,
		Host: "127.0.0.1", Port: port, NoMonitor: true,
		StoreDir: filepath.Join(f.Dir, "store"), Logger: f.logger,
	})
}

// RestartBus starts the single bus again after f.Bus.Shutdown(), on the
// same port and store: clients find it at the URL they had.
func (f *Bus) RestartBus(tb testing.TB) {
	tb.Helper()
	u, err := url.Parse(f.URL)
	if err != nil {
		tb.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		tb.Fatalf("bus URL %s: %v", f.URL, err)
	}
	b, err := f.startBus(port)
	if err != nil {
		tb.Fatalf("restart the bus: %v", err)
	}
	f.Bus = b
}

// Start is New for a test: temp dir, stopped when the test ends.
func Start(tb testing.TB, cfg flock.Config, opts ...Option) *Bus {
	tb.Helper()
	f, err := New(tb.TempDir(), cfg, testLogger(), opts...)
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(f.Close)
	return f
}

// StartWithMaster is Start with the operator's key derived from master, as
// the stacks derive it from flock:busSecret: a test can then use the very
// credential a captured stack hands its operator.
func StartWithMaster(tb testing.TB, cfg flock.Config, master []byte) *Bus {
	tb.Helper()
	f, err := newWithMaster(tb.TempDir(), cfg, testLogger(), master)
	if err != nil {
		tb.Fatalf("start bus: %v", err)
	}
	tb.Cleanup(f.Close)
	return f
}

// Close stops the services and the bus (every node that runs).
func (f *Bus) Close() {
	f.StopServices()
	if f.Nodes == nil {
		f.Bus.Shutdown()
		return
	}
	for _, n := range f.Nodes {
		n.stop()
	}
}

// Rerender writes cfg's files and reloads the running bus (SIGHUP's path).
func (f *Bus) Rerender(tb testing.TB, cfg flock.Config) {
	tb.Helper()
	if err := f.render(cfg); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if f.Nodes == nil {
		if err := f.Bus.Reload(ctx); err != nil {
			tb.Fatalf("reload bus: %v", err)
		}
		return
	}
	for _, n := range f.Nodes {
		if s := n.Server(); s != nil {
			if err := s.Reload(ctx); err != nil {
				tb.Fatalf("reload bus node %d: %v", n.Num, err)
			}
		}
	}
}

// RotateAgentKeys derives every agent's key from a new secret, as changing
// flock:busSecret does: their seed files under Dir are replaced (by rename,
// as the host step does) and the bus reloads with the new public keys. The
// operator's key stays.
func (f *Bus) RotateAgentKeys(tb testing.TB, secret []byte) {
	tb.Helper()
	f.agentMaster = secret
	for _, id := range f.Model.AgentIDs() {
		if _, err := f.WriteSeed(id); err != nil {
			tb.Fatal(err)
		}
	}
	f.Rerender(tb, f.cfg)
}

func (f *Bus) render(cfg flock.Config) error {
	m, err := cfg.Validate()
	if err != nil {
		return fmt.Errorf("flock config: %w", err)
	}
	op, err := credentials.Derive(f.master, protocol.OperatorUser)
	if err != nil {
		return err
	}
	gw, err := credentials.Derive(f.master, protocol.GatewayUser)
	if err != nil {
		return err
	}
	svc, err := credentials.Derive(f.master, protocol.ServicesUser)
	if err != nil {
		return err
	}
	keys := busconfig.PublicKeys{Operator: op.Public, Agents: map[string]string{}, Gateway: gw.Public, Services: svc.Public}
	for _, id := range m.AgentIDs() {
		k, err := credentials.Derive(f.agentMaster, protocol.AgentUser(id))
		if err != nil {
			return err
		}
		keys.Agents[id] = k.Public
	}
	if m.Bus.Clustered() {
		// Every node on loopback: the route ports are the bus.Config's.
		hosts := make([]string, m.Bus.Replicas)
		for i := range hosts {
			hosts[i] = "127.0.0.1"
		}
		for _, n := range m.Bus.BusNodes() {
			conf, err := busconfig.Render(m, keys, busconfig.Options{StoreDir: f.nodeStore(n), Node: n, RouteHost: "127.0.0.1", Routes: hosts})
			if err != nil {
				return fmt.Errorf("render bus config of node %d: %w", n, err)
			}
			if err := writeFile(f.nodeConfig(n), conf); err != nil {
				return err
			}
		}
	} else {
		conf, err := busconfig.Render(m, keys, busconfig.Options{StoreDir: filepath.Join(f.Dir, "store")})
		if err != nil {
			return fmt.Errorf("render bus config: %w", err)
		}
		if err := writeFile(f.ConfigFile, conf); err != nil {
			return err
		}
	}
	// As the stacks render it: the services' link read at no peer rate.
	topo, err := busconfig.RenderTopology(m, busconfig.Peers{Unthrottled: []string{svc.Public}})
	if err != nil {
		return fmt.Errorf("render topology: %w", err)
	}
	if err := writeFile(f.TopologyFile, topo); err != nil {
		return err
	}
	f.Model, f.cfg = m, cfg
	return nil
}

func writeFile(p string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// testLogger logs the bus to stderr when FLOCK_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("FLOCK_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "bus")
}

// JetStream is a JetStream client on nc; the test fails if it cannot be made.
func JetStream(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream: %v", err)
	}
	return js
}
