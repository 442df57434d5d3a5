// Package bus is the flock's message bus: nats-server embedded, configured
// from the file busconfig renders, with the JetStream topology (streams and
// durable consumers) kept in step with the topology file and tasks that
// exhaust their deliveries parked on the dead-letter stream.
//
// The bus talks to its own server through an in-process connection as an
// admin user that exists only in memory: a fresh nkey per process start,
// appended to the rendered users with full permissions. Nobody else ever
// holds its seed, and it is gone when the process exits.
package bus

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/protocol"
)

// Config says where the rendered files are and what to override (tests).
type Config struct {
	ConfigFile   string // NATS server config (busconfig.Render); protocol.BusConfigFile by default
	TopologyFile string // JetStream topology (busconfig.RenderTopology); protocol.BusTopologyFile by default

	// Overrides, zero values keep the file's settings.
	Host        string // client listen host
	Port        int    // client port; -1 picks a free one
	MonitorPort int    // monitoring port; -1 picks a free one
	NoMonitor   bool   // no monitoring endpoint at all
	StoreDir    string // JetStream store directory

	// A clustered bus (the config has a cluster block): tests run every
	// node on loopback, so each needs its own route port and the others'.
	RoutePort int      // route listener port; -1 picks a free one
	Routes    []string // route URLs of the other nodes (nats-route://host:port)

	// BootstrapGrace: how long a cluster node alone waits before Healthy
	// says yes (DefaultBootstrapGrace when zero).
	BootstrapGrace time.Duration

	Logger       *slog.Logger  // nil: discard
	ReadyTimeout time.Duration // how long to wait for the server to accept clients; 10 s by default

}

// Server is a running bus.
type Server struct {
	cfg        Config
	log        *slog.Logger
	ns         *server.Server
	admin      nkeys.KeyPair
	nc         *nats.Conn
	js         jetstream.JetStream
	sub        *nats.Subscription
	rost       *nats.Subscription
	ln         net.Listener // clients connect here (peers.go), not to the server's own listener
	peers      *peerLimits
	refusals   refusalLog // connections past a peer's share
	violations refusalLog // connections closed by the reply guard
	replies    replyRules // the reply subjects each user may give (replyguard.go)

	clientHost string // the config's client listener, for the bus's own listener
	clientPort int

	mu       sync.Mutex // serialises Reload and reconcile
	topology protocol.Topology

	// A clustered node serves clients at once and reconciles in the
	// background until the cluster has a quorum (cluster.go).
	clustered  bool
	want       chan protocol.Topology // the topology to reconcile next
	reconciled chan struct{}          // closed once the first reconcile succeeds
	applied    sync.Cond              // signalled after each successful reconcile (on mu)
	generation uint64                 // successful reconciles so far (on mu)
	closing    bool                   // Shutdown began (on mu): nobody waits on applied any more
	waitingFor string                 // why the wanted topology is not applied yet (on mu)
	started    time.Time
	dead       chan advisory
	stop       chan struct{}
	done       sync.WaitGroup
	shutOnce   sync.Once
}

// Start loads the configuration, starts the server, connects as the in-memory
// admin, reconciles the topology and starts parking dead letters. ctx bounds
// the start only.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.ConfigFile == "" {
		cfg.ConfigFile = protocol.BusConfigFile
	}
	if cfg.TopologyFile == "" {
		cfg.TopologyFile = protocol.BusTopologyFile
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	if cfg.BootstrapGrace <= 0 {
		cfg.BootstrapGrace = DefaultBootstrapGrace
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	admin, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("bus: admin key: %w", err)
	}
	s := &Server{cfg: cfg, log: log, admin: admin, dead: make(chan advisory, 1024), stop: make(chan struct{}), peers: newPeerLimits(),
		want: make(chan protocol.Topology, 1), reconciled: make(chan struct{})}
	s.applied.L = &s.mu

	topo, err := readTopology(cfg.TopologyFile)
	if err != nil {
		return nil, err
	}
	opts, err := s.options()
	if err != nil {
		return nil, err
	}
	s.replies.set(opts.Nkeys)
	if err := s.peers.set(topo.Peers); err != nil {
		return nil, fmt.Errorf("bus: topology: %w", err)
	}
	host, port := s.listenAddr()
	if s.ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
		return nil, fmt.Errorf("bus: listen: %w", err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		s.ln.Close()
		return nil, fmt.Errorf("bus: %w", err)
	}
	ns.SetLoggerV2(&natsLogger{log: log.With("component", "nats")}, false, false, false)
	s.ns, s.started = ns, time.Now()
	ns.Start()
	if !ns.ReadyForConnections(cfg.ReadyTimeout) {
		ns.Shutdown()
		s.ln.Close()
		return nil, fmt.Errorf("bus: server not ready after %s", cfg.ReadyTimeout)
	}
	pub, _ := admin.PublicKey()
	s.nc, err = nats.Connect("", nats.InProcessServer(ns), nats.Name("flock-bus-admin"),
		nats.Nkey(pub, admin.Sign), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("admin connection", "err", err)
		}))
	if err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("bus: admin connection: %w", err)
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		s.nc.Close()
		ns.Shutdown()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}

	s.done.Add(1)
	go s.parkLoop()
	s.sub, err = s.nc.Subscribe(maxDeliveriesAdvisories, s.onAdvisory)
	if err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("bus: subscribe advisories: %w", err)
	}
	if s.clustered {
		// No node can change the JetStream layout before the cluster has a
		// quorum, and this one may be the first up: serve clients now (core
		// messaging needs no quorum) and reconcile once the others answer.
		s.topology = topo
		s.startReconciler(topo)
	} else if err := s.reconcile(ctx, topo); err != nil {
		s.Shutdown()
		return nil, err
	}
	if !s.clustered {
		s.servicesApplied(topo) // a clustered node's reconciler writes it (cluster.go)
	}
	if s.rost, err = s.nc.Subscribe(protocol.SubjectRoster, s.onRoster); err != nil {
		s.Shutdown()
		return nil, fmt.Errorf("bus: subscribe roster: %w", err)
	}
	s.done.Add(1)
	go s.poolLoop()
	// A single node serves clients only now: the topology is in place when
	// the first agent binds (agents wait for their consumers either way).
	s.done.Add(1)
	go s.serveClients(s.ln)
	log.Info("bus ready", "url", s.ClientURL(), "clustered", s.clustered, "streams", len(topo.Streams), "consumers", len(topo.Consumers))
	return s, nil
}

// listenAddr is where the bus's own client listener binds: the config's
// client host and port, or the overrides (-1: a free port).
func (s *Server) listenAddr() (string, int) {
	host, port := s.clientHost, s.clientPort
	if port < 0 {
		port = 0
	}
	return host, port
}

// options reads the config file and applies the overrides and the admin user.
func (s *Server) options() (*server.Options, error) {
	opts, err := loadConfig(s.cfg.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("bus: config %s: %w", s.cfg.ConfigFile, err)
	}
	c := s.cfg
	if c.Host != "" {
		opts.Host = c.Host
	}
	if c.Port != 0 {
		opts.Port = c.Port
	}
	s.clientHost, s.clientPort = opts.Host, opts.Port
	switch {
	case c.NoMonitor:
		opts.HTTPPort, opts.HTTPHost = 0, ""
	case c.MonitorPort != 0:
		opts.HTTPPort = c.MonitorPort
	}
	if c.StoreDir != "" {
		opts.StoreDir = c.StoreDir
	}
	opts.NoSigs = true // the bus owns SIGHUP/SIGTERM
	// Clients reach the server through the bus's own listener, which bounds
	// what each peer may send (peers.go); the server listens nowhere itself.
	opts.DontListen = true
	if opts.Cluster.Port != 0 {
		s.clustered = true
		if c.RoutePort != 0 {
			opts.Cluster.Port = c.RoutePort
		}
		if c.Routes != nil {
			routes, err := parseRoutes(c.Routes)
			if err != nil {
				return nil, err
			}
			opts.Routes = routes
		}
		// nats-server starts its routes only after its own client accept
		// loop, which DontListen skips: a clustered server listens on the
		// container's loopback (no peer reaches it there) and clients still
		// come in through the bus's listener.
		opts.DontListen = false
		opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	}
	pub, _ := s.admin.PublicKey()
	opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub}) // nil permissions: everything
	return opts, nil
}

// ClientURL is where clients connect (nats://host:port).
func (s *Server) ClientURL() string {
	ap, err := netip.ParseAddrPort(s.ln.Addr().String())
	if err != nil {
		return "nats://" + s.ln.Addr().String()
	}
	host := ap.Addr().String()
	if ap.Addr().IsUnspecified() {
		host = "127.0.0.1"
	}
	return "nats://" + net.JoinHostPort(host, strconv.Itoa(int(ap.Port())))
}

// Reload re-reads the config and topology files, applies the config to the
// running server (new and removed users, changed permissions) and reconciles
// the topology. Clients stay connected.
func (s *Server) Reload(ctx context.Context) error {
	s.mu.Lock()
	opts, err := s.options()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	topo, err := readTopology(s.cfg.TopologyFile)
	if err != nil {
		return err
	}
	if err := s.peers.set(topo.Peers); err != nil {
		return fmt.Errorf("bus: reload: topology: %w", err)
	}
	// Before the server takes the new users: none connects before its rule.
	s.replies.set(opts.Nkeys)
	if err := s.ns.ReloadOptions(opts); err != nil {
		return fmt.Errorf("bus: reload: %w", err)
	}
	if s.clustered {
		if err := s.reconcileInBackground(ctx, topo); err != nil {
			return err
		}
	} else {
		err := s.reconcile(ctx, topo)
		// What the services know of the agents follows the topology even
		// when part of the layout could not be made.
		s.servicesApplied(topo)
		if err != nil {
			return err
		}
	}
	s.log.Info("bus reloaded", "streams", len(topo.Streams), "consumers", len(topo.Consumers))
	return nil
}

// Shutdown stops parking dead letters, closes the admin connection and shuts
// the server down. Safe to call more than once.
func (s *Server) Shutdown() {
	s.shutOnce.Do(func() {
		for _, sub := range []*nats.Subscription{s.sub, s.rost} {
			if sub != nil {
				_ = sub.Unsubscribe()
			}
		}
		close(s.stop)
		s.mu.Lock()
		s.closing = true
		s.applied.Broadcast()
		s.mu.Unlock()
		if s.ln != nil {
			s.ln.Close()
		}
		s.done.Wait()
		if s.nc != nil {
			s.nc.Close()
		}
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		s.log.Info("bus stopped")
	})
}

// Topology returns the topology last reconciled.
func (s *Server) Topology() protocol.Topology {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topology
}
