package bus

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"

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

// peerLimits holds one token bucket per peer address.
type peerLimits struct {
	mu    sync.Mutex
	rate  rate.Limit
	burst int
	by    map[netip.Addr]*rate.Limiter
}

func newPeerLimits() *peerLimits { return &peerLimits{by: map[netip.Addr]*rate.Limiter{}} }

// set applies the topology's limits to every bucket, existing ones too (a
// reload). A zero rate means no limit.
func (p *peerLimits) set(l protocol.PeerLimits) {
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
}

// limiter is the bucket of a peer; nil for one that is not limited.
func (p *peerLimits) limiter(addr net.Addr) *rate.Limiter {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || ap.Addr().IsLoopback() {
		return nil
	}
	ip := ap.Addr().Unmap()
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
// through its bucket.
func (s *Server) relay(c net.Conn) {
	sc, err := s.ns.InProcessConn()
	if err != nil {
		c.Close()
		return
	}
	lim := s.peers.limiter(c.RemoteAddr())
	go func() {
		_, _ = io.Copy(c, sc) // server -> peer: never limited
		c.Close()
		sc.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
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
			if _, werr := sc.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	sc.Close()
	c.Close()
}
