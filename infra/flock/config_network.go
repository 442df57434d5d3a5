package flock

import (
	"net/netip"
	"path"
	"strings"
)

func (s SharedConfig) validate(es *errs) Shared {
	out := DefaultShared
	check := func(key, v string, dst *string) {
		if v == "" {
			return
		}
		if !path.IsAbs(v) || path.Clean(v) != v || strings.ContainsAny(v, " \t\n'\"$`\\;&|*?") {
			es.add(key, "must be a clean absolute path without spaces or shell characters (got %q)", v)
			return
		}
		for _, f := range forbiddenRoots {
			if v == f {
				es.add(key, "must not be the system directory %s", f)
				return
			}
		}
		*dst = v
	}
	check("flock:shared.root", s.Root, &out.Root)
	check("flock:shared.stateRoot", s.StateRoot, &out.StateRoot)
	if within(out.Root, out.StateRoot) || within(out.StateRoot, out.Root) {
		es.add("flock:shared.stateRoot", "must not overlap flock:shared.root: the state root holds credentials (got %q and %q)", out.StateRoot, out.Root)
	}
	return out
}

func within(dir, p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (n NetworkConfig) validate(es *errs) Network {
	out := DefaultNetwork
	if n.Pool != "" {
		p, err := netip.ParsePrefix(n.Pool)
		switch {
		case err != nil:
			es.add("flock:network.pool", "must be an IPv4 CIDR such as 10.210.0.0/16 (got %q)", n.Pool)
		case !p.Addr().Is4() || !p.Addr().IsPrivate():
			es.add("flock:network.pool", "must be a private IPv4 range (RFC 1918) (got %q)", n.Pool)
		case p.Masked() != p:
			es.add("flock:network.pool", "must be a network address: %s, not %s", p.Masked(), p)
		default:
			out.Pool = p
		}
	}
	if n.PrefixLength != nil {
		if v := *n.PrefixLength; v < 24 || v > 29 {
			es.add("flock:network.prefixLength", "must be between 24 and 29: each agent network holds a gateway, the bus and the agent (got %d)", v)
		} else {
			out.PrefixLength = v
		}
	}
	if out.PrefixLength <= out.Pool.Bits() {
		es.add("flock:network.prefixLength", "must be longer than the pool's /%d so the pool splits into per-agent subnets (got %d)", out.Pool.Bits(), out.PrefixLength)
	}
	return out
}
