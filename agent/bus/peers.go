package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ai-flock/ai-flock/protocol"
)

// The bus accepts client connections itself and hands each to the embedded
// server as an in-process connection, reading from the peer through a token
// bucket of its own: every network peer (an agent, by its address on its own
// network, which it cannot change without capabilities it does not have) may
// send at most PeerBytesPerSecond, whatever it sends and over however many
// connections. A flooding agent is slowed by TCP itself (the bus reads its
// socket no faster than the bucket fills) and takes no more of the bus's
// CPU than its share; the others are not touched. Replies to peers are not
// limited. Loopback peers (the bus's own health check) are not limited.

//
// Each peer may also hold at most PeerLimits.Connections client connections
// at once (the peers in PeerLimits.Uncounted and loopback aside): the
// server's own max_connections is one figure for everyone, so without this
// one agent opening connections until it is reached would lock out the
// operator, the services and every other agent. The server's limit is set
// above the agents' shares together (flock.Bus.MaxConnections).

// peerLimits holds one token bucket and one connection count per peer address.
type peerLimits struct {
	mu        sync.Mutex
	rate      rate.Limit
	burst     int
	by        map[netip.Addr]*rate.Limiter
	maxConns  int
	uncounted []netip.Prefix
	conns     map[netip.Addr]int
	free      map[string]bool // users read at no rate (PeerLimits.Unthrottled)
}

func newPeerLimits() *peerLimits {
	return &peerLimits{by: map[netip.Addr]*rate.Limiter{}, conns: map[netip.Addr]int{}}
}

// set applies the topology's limits to every bucket, existing ones too (a
// reload). A zero rate means no limit; zero connections too. Connections
// already open stay open after a reload that lowers the bound.
func (p *peerLimits) set(l protocol.PeerLimits) error {
	var uncounted []netip.Prefix
	for _, s := range l.Uncounted {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("peers.uncounted: %w", err)
		}
		uncounted = append(uncounted, pfx.Masked())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.burst = rate.Inf, 0
	if l.BytesPerSecond > 0 {
		p.rate, p.burst = rate.Limit(l.BytesPerSecond), int(max(l.BurstBytes, l.BytesPerSecond))
	}
	for _, lim := range p.by {
		lim.SetLimit(p.rate)
		lim.SetBurst(p.burst)
	}
	p.maxConns, p.uncounted = l.Connections, uncounted
	p.free = map[string]bool{}
	for _, k := range l.Unthrottled {
		p.free[k] = true
	}
	return nil
}

// unthrottled reports whether the user with that nkey is read at no rate.
func (p *peerLimits) unthrottled(nkey string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nkey != "" && p.free[nkey]
}

// peerAddr is a connection's peer address; false for loopback or an address
// that is not IP.
func peerAddr(addr net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || ap.Addr().IsLoopback() {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// admit counts a new connection of its peer: false when the peer already
// holds its share (and then nothing is counted), else a release to call
// when the connection ends.
func (p *peerLimits) admit(addr net.Addr) (release func(), held int, ok bool) {
	ip, limited := peerAddr(addr)
	if !limited {
		return func() {}, 0, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pfx := range p.uncounted {
		if pfx.Contains(ip) {
			return func() {}, 0, true
		}
	}
	held = p.conns[ip]
	if p.maxConns > 0 && held >= p.maxConns {
		return nil, held, false
	}
	p.conns[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.conns[ip]--; p.conns[ip] <= 0 {
				delete(p.conns, ip)
			}
		})
	}, held + 1, true
}

// limiter is the bucket of a peer; nil for one that is not limited.
func (p *peerLimits) limiter(addr net.Addr) *rate.Limiter {
	ip, limited := peerAddr(addr)
	if !limited {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lim, ok := p.by[ip]
	if !ok {
		lim = rate.NewLimiter(p.rate, p.burst)
		p.by[ip] = lim
	}
	return lim
}

// serveClients accepts client connections until the listener closes.
func (s *Server) serveClients(l net.Listener) {
	defer s.done.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("client listener stopped", "err", err)
			}
			return
		}
		go s.relay(c)
	}
}

// relay joins one client connection to the server, the peer's side read
// through its bucket and its reply guard (replyguard.go).
func (s *Server) relay(c net.Conn) {
	release, held, ok := s.peers.admit(c.RemoteAddr())
	if !ok {
		refuse(c, held)
		s.refusals.note(s.log, c.RemoteAddr(), "connections refused: the peer holds its share of the bus's connections")
		return
	}
	defer release()
	sc, err := s.ns.InProcessConn()
	if err != nil {
		c.Close()
		return
	}
	lim := s.peers.limiter(c.RemoteAddr())
	var refusal atomic.Pointer[string]
	watch := &acceptWatch{w: c}
	go func() {
		_, _ = io.Copy(watch, sc) // server -> peer: never limited
		// A refused connection: the server's side was closed first; the
		// client is told why (after whatever of the server's it was sent).
		if r := refusal.Load(); r != nil {
			_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			_, _ = fmt.Fprintf(c, "-ERR '%s'\r\n", *r)
		}
		c.Close()
		sc.Close()
	}()
	guard := replyGuard{rules: &s.replies}
	buf := make([]byte, 32<<10)
	var out []byte
	for {
		n, err := c.Read(buf)
		if lim != nil && guard.connected && watch.accepted.Load() && s.peers.unthrottled(guard.User) {
			lim = nil // an unthrottled user, its CONNECT accepted: read at no rate from now on
		}
		if n > 0 {
			if lim != nil {
				// WaitN refuses n above the burst: take it in pieces.
				for left := n; left > 0; {
					k := min(left, max(lim.Burst(), 1))
					if lim.Limit() != rate.Inf && lim.WaitN(context.Background(), k) != nil {
						break
					}
					left -= k
				}
			}
			var gerr error
			out, gerr = guard.feed(buf[:n], out[:0])
			if len(out) > 0 {
				if _, werr := sc.Write(out); werr != nil {
					break
				}
			}
			if gerr != nil {
				why := strings.ReplaceAll(strings.TrimPrefix(gerr.Error(), errRefused.Error()+": "), "'", "\"")
				refusal.Store(&why)
				s.violations.note(s.log, c.RemoteAddr(), "connections closed: the client sent what the bus refuses", "user", guard.User, "why", why)
				break
			}
		}
		if err != nil {
			break
		}
	}
	if refusal.Load() != nil {
		// The server's side ends and the goroutine above tells the client
		// why and closes it; a client that does not read holds that write
		// 2 s at most (then its socket is closed all the same).
		_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
		sc.Close()
		return
	}
	sc.Close()
	c.Close()
}

// acceptWatch passes the server's output on to the peer and tells when the
// server accepted the client's CONNECT. nats-server answers a client's
// first PING with a PONG only once its CONNECT passed authentication (one
// that fails gets -ERR and the connection is closed before anything else
// it sent is read), and clients send PING right after CONNECT. Until then
// the server sends control lines only (INFO, +OK, PING, PONG, -ERR): the
// watch reads them as lines up to the first PONG, or gives up at -ERR or
// after acceptWatchMax bytes; afterwards it passes bytes untouched.
// acceptWatchMax bounds what the watch reads (an INFO is well under it).
const acceptWatchMax = 64 << 10

type acceptWatch struct {
	w        io.Writer
	accepted atomic.Bool
	done     bool // accepted, or given up (the copying goroutine's own)
	line     []byte
	seen     int
}

func (a *acceptWatch) Write(p []byte) (int, error) {
	for rest := p; !a.done && len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		if a.seen += i + 1; a.seen > acceptWatchMax {
			a.done, a.line = true, nil // no PONG where one comes: not accepted
			break
		}
		if rest[i] != '\n' {
			a.line = append(a.line, rest...)
			break
		}
		line := bytes.TrimSuffix(append(a.line, rest[:i]...), []byte("\r"))
		rest, a.line = rest[i+1:], a.line[:0]
		switch {
		case bytes.Equal(line, []byte("PONG")):
			a.accepted.Store(true)
			a.done = true
		case bytes.HasPrefix(line, []byte("-ERR")):
			a.done = true
		}
	}
	return a.w.Write(p)
}

// refusalLog logs what it is told at most once a minute per peer, with how
// many times it was told since: a peer hammering the bus must not flood
// its log.
type refusalLog struct {
	mu   sync.Mutex
	last map[string]time.Time
	n    map[string]int
}

func (r *refusalLog) note(log *slog.Logger, addr net.Addr, msg string, attrs ...any) {
	ip, _ := peerAddr(addr)
	key := ip.String()
	r.mu.Lock()
	if r.last == nil {
		r.last, r.n = map[string]time.Time{}, map[string]int{}
	}
	r.n[key]++
	if time.Since(r.last[key]) < time.Minute {
		r.mu.Unlock()
		return
	}
	n := r.n[key]
	r.last[key], r.n[key] = time.Now(), 0
	r.mu.Unlock()
	log.Warn(msg, append([]any{"peer", key, "times", n}, attrs...)...)
}

// refusing bounds the refusals answered at once.
var refusing = make(chan struct{}, 64)

// refuse answers a connection past its peer's share in the protocol's own
// words, so that the client reports why: an INFO (a client waits for one),
// its CONNECT and PING read (at most 64 KiB, for at most 2 s: a closed
// socket would break its write first), then -ERR, then close.
func refuse(c net.Conn, held int) {
	defer c.Close()
	// A peer hammering the port gets the words only while few refusals are
	// under way: each holds a socket and a buffer for up to 2 s.
	select {
	case refusing <- struct{}{}:
		defer func() { <-refusing }()
	default:
		return
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "INFO {\"server_id\":\"flock-bus\",\"proto\":1,\"max_payload\":1024,\"auth_required\":true,\"nonce\":\"refused\"}\r\n"); err != nil {
		return
	}
	buf := make([]byte, 4<<10)
	var seen []byte
	for len(seen) < 64<<10 && !bytes.Contains(seen, []byte("PING\r\n")) {
		n, err := c.Read(buf)
		seen = append(seen, buf[:n]...)
		if err != nil {
			break
		}
	}
	_, _ = fmt.Fprintf(c, "-ERR 'maximum connections per peer exceeded: %s holds %d'\r\n", c.RemoteAddr(), held)
}
