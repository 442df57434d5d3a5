package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// DefaultMaxConnsPerPeer bounds the connections one peer address holds open
// to the gateway at once: twice the calls it may have in flight, so keep-
// alive connections fit beside them.
const DefaultMaxConnsPerPeer = 2 * DefaultMaxInFlight

// PeerListener accepts at most max connections open at once from each peer
// address (loopback aside). An agent's address is its own (on dev its own
// network, on aws its task's), so one agent holding thousands of idle
// connections, or opening them as fast as it can, runs out of its own share
// and never of the gateway's file descriptors, which the others need. A
// connection past the share gets a 429 and is closed; Accept goes on.
type PeerListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	conns   map[netip.Addr]int
	refused map[netip.Addr]time.Time // last logged, per peer
}

// LimitPeers wraps ln; max 0 means DefaultMaxConnsPerPeer.
func LimitPeers(ln net.Listener, max int, log *slog.Logger) *PeerListener {
	if max <= 0 {
		max = DefaultMaxConnsPerPeer
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PeerListener{Listener: ln, max: max, log: log, conns: map[netip.Addr]int{}, refused: map[netip.Addr]time.Time{}}
}

// Accept returns the next connection within its peer's share.
func (l *PeerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ap, perr := netip.ParseAddrPort(c.RemoteAddr().String())
		if perr != nil || ap.Addr().IsLoopback() {
			return c, nil
		}
		ip := ap.Addr().Unmap()
		l.mu.Lock()
		held := l.conns[ip]
		if held >= l.max {
			logIt := time.Since(l.refused[ip]) >= time.Minute
			if logIt {
				l.refused[ip] = time.Now()
			}
			l.mu.Unlock()
			if logIt {
				l.log.Warn("connection refused: the peer holds its share of the gateway's connections", "peer", ip.String(), "limit", l.max)
			}
			go tooMany(c, l.max)
			continue
		}
		l.conns[ip]++
		l.mu.Unlock()
		return &peerConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *PeerListener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns[ip]--; l.conns[ip] <= 0 {
		delete(l.conns, ip)
	}
}

// Held is how many connections peer holds now.
func (l *PeerListener) Held(peer netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[peer]
}

// tooMany answers a connection past its share with a 429, then closes it.
func tooMany(c net.Conn, max int) {
	defer c.Close()
	body := fmt.Sprintf(`{"type":"error","error":{"type":"too_many_connections","message":"this address holds %d connections to the gateway, its limit: close idle ones"}}`, max)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// peerConn gives its peer's place back once, when closed.
type peerConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *peerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
