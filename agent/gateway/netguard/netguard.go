// Package netguard keeps the gateway's way out from reaching a private
// place: every upstream connection resolves its name once, checks every
// address, and dials only an address it checked, the check repeated in the
// dialer's Control hook on the very address the socket connects to, so
// nothing changes between check and dial (a name that resolves to a public
// address, then to 169.254.169.254, gets nowhere).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Refused are the ranges no upstream connection may reach unless a rule
// names one of them explicitly: this host, private networks, link-local
// (169.254.169.254 is the instance's and ECS task's metadata and
// credentials), carrier-grade NAT, multicast and reserved space, and their
// IPv6 and IPv4-mapped forms (NAT64 and 6to4 embed an IPv4 address).
var Refused = prefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "fc00::/7", "fe80::/10", "ff00::/8",
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Resolver is what the guard resolves names with (net.DefaultResolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard dials upstreams for the gateway.
type Guard struct {
	refused  []netip.Prefix
	resolver Resolver
	timeout  time.Duration
}

// New returns a guard refusing Refused and also own (the flock's pool, the
// gateway's own addresses).
func New(resolver Resolver, own ...netip.Prefix) *Guard {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	return &Guard{refused: append(append([]netip.Prefix(nil), Refused...), own...), resolver: resolver, timeout: 10 * time.Second}
}

// OwnAddresses are the addresses of this host's interfaces, each as a
// single-address range: the gateway's host is never an upstream.
func OwnAddresses() []netip.Prefix {
	var out []netip.Prefix
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			}
		}
	}
	return out
}

// RefusedError is an address the guard will not dial.
type RefusedError struct {
	Host string
	Addr netip.Addr
	In   netip.Prefix
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s resolves to %s, in %s, a range the gateway never dials unless a rule names it (privateRanges)", e.Host, e.Addr, e.In)
}

// Check returns a *RefusedError when addr is refused and no range of
// allowed holds it.
func (g *Guard) Check(host string, addr netip.Addr, allowed []netip.Prefix) error {
	a := embedded(addr.Unmap().WithZone(""))
	for _, p := range allowed {
		if p.Contains(a) || p.Contains(addr.Unmap()) {
			return nil
		}
	}
	for _, p := range g.refused {
		if p.Contains(a) || p.Contains(addr.Unmap()) {
			return &RefusedError{Host: host, Addr: addr, In: p}
		}
	}
	return nil
}

// embedded is the IPv4 address a NAT64 or 6to4 address carries (checked as
// what it reaches), else a itself.
func embedded(a netip.Addr) netip.Addr {
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case b[0] == 0x20 && b[1] == 0x02: // 2002:AABB:CCDD::/48
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return a
}

// dialer checks the address each socket connects to, in the Control hook
// that runs after the address is fixed and before connect(2).
func (g *Guard) dialer(host string, allowed []netip.Prefix) *net.Dialer {
	return &net.Dialer{Timeout: g.timeout, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("netguard: dialing %q, not an address", address)
		}
		return g.Check(host, ap.Addr(), allowed)
	}}
}

// Dial connects to host:port: it resolves host once, refuses the whole name
// if any address is refused (a name with one private address is not an
// upstream), then dials the checked addresses in turn, each by its literal
// address through a dialer whose Control hook checks again.
func (g *Guard) Dial(ctx context.Context, host string, port int, allowed []netip.Prefix) (net.Conn, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		rctx, cancel := context.WithTimeout(ctx, g.timeout)
		addrs, err = g.resolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no address", host)
		}
	}
	for _, a := range addrs {
		if err := g.Check(host, a, allowed); err != nil {
			return nil, err
		}
	}
	d := g.dialer(host, allowed)
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
