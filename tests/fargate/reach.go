package fargate

import (
	"net/netip"
	"slices"
)

// Reachability between tasks, derived from the security groups as AWS
// evaluates them: a connection from a task in groups A to a task in groups B
// on port p needs an egress rule of A allowing p to B (naming one of B's
// groups, or an address range holding B's subnet) and an ingress rule of B
// allowing p from A (likewise). Security groups are stateful: the answer
// goes back whatever the rules say.
//
// The replay turns it into networks, which are neither port-exact nor
// one-way: a task that may reach another on any port shares a network with
// it, over which both may reach each other on every port. The README lists
// this among what the replay does not reproduce.

// Endpoint is one side of a connection: a task's groups and subnet.
type Endpoint struct {
	Groups []string
	Subnet string // subnet ID ("" when unknown: an existing VPC's)
}

// allows reports whether rule r covers port p (-1: any) toward or from peer.
func (m *Model) allows(r Rule, p int, peer Endpoint) bool {
	if r.Protocol != "-1" && r.Protocol != "all" && r.Protocol != "tcp" && r.Protocol != "6" {
		return false
	}
	if r.Protocol == "tcp" || r.Protocol == "6" {
		if p >= 0 && (p < r.FromPort || p > r.ToPort) {
			return false
		}
	}
	if r.Peer != "" && slices.Contains(peer.Groups, r.Peer) {
		return true
	}
	return m.inRanges(r.CIDRs, peer.Subnet)
}

// inRanges reports whether a task in subnet has its address in one of cidrs
// (0.0.0.0/0 holds every address, known subnet or not).
func (m *Model) inRanges(cidrs []netip.Prefix, subnet string) bool {
	sn := m.Subnets[subnet]
	for _, c := range cidrs {
		if c.Bits() == 0 {
			return true
		}
		if sn != nil && c.Contains(sn.CIDR.Addr()) && c.Bits() <= sn.CIDR.Bits() {
			return true
		}
	}
	return false
}

func (m *Model) rules(groups []string, egress bool) []Rule {
	var out []Rule
	for _, id := range groups {
		if g := m.Groups[id]; g != nil {
			if egress {
				out = append(out, g.Egress...)
			} else {
				out = append(out, g.Ingress...)
			}
		}
	}
	return out
}

// Reach reports whether from may open a connection to to on some port:
// an egress rule of from's and an ingress rule of to's whose ports overlap.
func (m *Model) Reach(from, to Endpoint) bool {
	for _, out := range m.rules(from.Groups, true) {
		if !m.allows(out, -1, to) {
			continue
		}
		for _, in := range m.rules(to.Groups, false) {
			if !m.allows(in, -1, from) {
				continue
			}
			if overlap(out, in) {
				return true
			}
		}
	}
	return false
}

// ReachPort is Reach on one TCP port.
func (m *Model) ReachPort(from, to Endpoint, port int) bool {
	out := slices.ContainsFunc(m.rules(from.Groups, true), func(r Rule) bool { return m.allows(r, port, to) })
	in := slices.ContainsFunc(m.rules(to.Groups, false), func(r Rule) bool { return m.allows(r, port, from) })
	return out && in
}

func overlap(a, b Rule) bool {
	all := func(r Rule) bool { return r.Protocol == "-1" || r.Protocol == "all" }
	if all(a) || all(b) {
		return true
	}
	return a.FromPort <= b.ToPort && b.FromPort <= a.ToPort
}

// RouteOut reports whether a task at e reaches the internet on port
// (-1: any): an egress rule to an address range outside the VPC
// (0.0.0.0/0) and a default route out of its subnet (a NAT or internet
// gateway). With an existing VPC the subnet's routes are unknown: its
// egress rule decides.
func (m *Model) RouteOut(e Endpoint, port int) bool {
	open := slices.ContainsFunc(m.rules(e.Groups, true), func(r Rule) bool {
		return slices.ContainsFunc(r.CIDRs, func(c netip.Prefix) bool { return c.Bits() == 0 }) && m.allows(r, port, Endpoint{})
	})
	if !open {
		return false
	}
	sn := m.Subnets[e.Subnet]
	return sn == nil || sn.RouteOut
}

// ReachesAWS reports whether a task at e reaches the AWS APIs Fargate uses
// for it (ECR to pull its image, CloudWatch Logs, Secrets Manager for its
// secrets): through the interface endpoints (HTTPS to their group, which
// admits it) and S3's gateway endpoint for image layers (HTTPS to its
// prefix list), or through a route out on 443.
func (m *Model) ReachesAWS(e Endpoint) bool {
	if m.RouteOut(e, 443) {
		return true
	}
	endpoints := false
	for _, g := range m.EndpointGroups {
		if m.ReachPort(e, Endpoint{Groups: []string{g}}, 443) {
			endpoints = true
		}
	}
	layers := slices.ContainsFunc(m.rules(e.Groups, true), func(r Rule) bool {
		return slices.ContainsFunc(r.PrefixLists, func(p string) bool { return slices.Contains(m.PrefixLists, p) }) &&
			(r.Protocol == "-1" || (r.FromPort <= 443 && 443 <= r.ToPort))
	})
	return endpoints && layers
}

// ReachesEFS reports whether a task at e reaches file system fs's mount
// targets on NFS (2049).
func (m *Model) ReachesEFS(e Endpoint, fs string) bool {
	for _, g := range m.EFSGroups[fs] {
		if m.ReachPort(e, Endpoint{Groups: []string{g}}, 2049) {
			return true
		}
	}
	return false
}
