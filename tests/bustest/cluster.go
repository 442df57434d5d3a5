package bustest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/bus"
	"github.com/ai-flock/ai-flock/infra/flock"
)

// Node is one node of a three-node test bus: its ports stay the same
// across restarts, so clients given every node's URL find it again.
type Node struct {
	Num        int
	ClientPort int
	RoutePort  int

	f      *Bus
	routes []string // the other nodes' route URLs
	mu     sync.Mutex
	srv    *bus.Server
}

// Server is the running node, nil while it is stopped.
func (n *Node) Server() *bus.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// URL is the node's client URL.
func (n *Node) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.ClientPort) }

func (f *Bus) nodeConfig(n int) string {
	return filepath.Join(f.Dir, "node-"+strconv.Itoa(n)+".conf")
}
func (f *Bus) nodeStore(n int) string { return filepath.Join(f.Dir, "store-"+strconv.Itoa(n)) }

// StartCluster is Start with a three-node bus (flock:bus.replicas 3, set
// here): every node on loopback with its own store, all of them up and
// their topology applied when it returns. URL lists every node.
func StartCluster(tb testing.TB, cfg flock.Config, opts ...Option) *Bus {
	tb.Helper()
	f := NewCluster(tb, cfg, opts...)
	for _, n := range f.Nodes {
		f.Restart(tb, n.Num)
	}
	f.Bus = f.Nodes[0].Server()
	f.WaitReady(tb, 60*time.Second)
	if err := f.startServices(); err != nil {
		tb.Fatal(err)
	}
	return f
}

// NewCluster renders a three-node bus and starts none of its nodes
// (Restart starts one).
func NewCluster(tb testing.TB, cfg flock.Config, opts ...Option) *Bus {
	tb.Helper()
	three := 3
	cfg.Bus.Replicas = &three
	dir := tb.TempDir()
	f := &Bus{Dir: dir, TopologyFile: filepath.Join(dir, "topology.json"), master: Master, agentMaster: Master}
	for _, o := range opts {
		o(&f.opts)
	}
	if err := f.render(cfg); err != nil {
		tb.Fatal(err)
	}
	ports := freePorts(tb, 2*f.Model.Bus.Replicas)
	for _, num := range f.Model.Bus.BusNodes() {
		f.Nodes = append(f.Nodes, &Node{Num: num, ClientPort: ports[2*(num-1)], RoutePort: ports[2*(num-1)+1], f: f})
	}
	var urls []string
	for _, n := range f.Nodes {
		for _, o := range f.Nodes {
			if o != n {
				n.routes = append(n.routes, "nats-route://127.0.0.1:"+strconv.Itoa(o.RoutePort))
			}
		}
		urls = append(urls, n.URL())
	}
	f.URL = strings.Join(urls, ",")
	tb.Cleanup(f.Close)
	return f
}

func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		return fmt.Errorf("node %d already runs", n.Num)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := bus.Start(ctx, bus.Config{
		ConfigFile: n.f.nodeConfig(n.Num), TopologyFile: n.f.TopologyFile,
		Host: "127.0.0.1", Port: n.ClientPort, NoMonitor: true,
		RoutePort: n.RoutePort, Routes: n.routes,
		StoreDir: n.f.nodeStore(n.Num), Logger: testLogger(), BootstrapGrace: n.f.BootstrapGrace,
	})
	if err != nil {
		return err
	}
	n.srv = s
	return nil
}

func (n *Node) stop() {
	n.mu.Lock()
	s := n.srv
	n.srv = nil
	n.mu.Unlock()
	if s != nil {
		s.Shutdown()
	}
}

// Stop shuts node num down (its store stays).
func (f *Bus) Stop(tb testing.TB, num int) {
	tb.Helper()
	f.Nodes[num-1].stop()
}

// Restart starts node num again on its ports and store.
func (f *Bus) Restart(tb testing.TB, num int) {
	tb.Helper()
	if err := f.Nodes[num-1].start(); err != nil {
		tb.Fatalf("restart bus node %d: %v", num, err)
	}
}

// WipeStore deletes node num's store (it must be stopped): a node replaced
// by a new one, which must catch up from the others.
func (f *Bus) WipeStore(tb testing.TB, num int) {
	tb.Helper()
	if f.Nodes[num-1].Server() != nil {
		tb.Fatalf("node %d runs: stop it before wiping its store", num)
	}
	if err := os.RemoveAll(f.nodeStore(num)); err != nil {
		tb.Fatal(err)
	}
}

// WaitReady waits until every running node is Ready.
func (f *Bus) WaitReady(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var notReady []string
		for _, n := range f.Nodes {
			if s := n.Server(); s != nil {
				if err := s.Ready(); err != nil {
					notReady = append(notReady, fmt.Sprintf("node %d: %v", n.Num, err))
				}
			}
		}
		if len(notReady) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("bus nodes not ready after %s: %s", timeout, strings.Join(notReady, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePorts returns n distinct free loopback ports.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
