package dockerflock

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// BusAddress is the bus network (the pool's slot-0 subnet) and the bus's
// address on it (.2; .1 is the gateway). Monitoring listens there only, so
// agents, which reach the bus only through their own networks, cannot read it.
func BusAddress(m flock.Model) (netip.Prefix, netip.Addr) {
	p := netip.PrefixFrom(m.Network.Pool.Masked().Addr(), m.Network.PrefixLength)
	return p, p.Addr().Next().Next()
}

// BusNodeAddress is bus node n's address on the bus network: .2, .3, .4.
// A clustered bus's routes run there too.
func BusNodeAddress(m flock.Model, n int) netip.Addr {
	_, a := BusAddress(m)
	return nth(a, n-1)
}

// AgentBusAddress is the bus's fixed address on an agent's network: .1 is
// the (unassigned) gateway, .2 the bus; the agent takes the next free one.
func AgentBusAddress(a flock.Agent) netip.Addr { return a.Subnet.Addr().Next().Next() }

// AgentBusNodeAddress is bus node n's fixed address on an agent's network:
// .2, .3, .4.
func AgentBusNodeAddress(a flock.Agent, n int) netip.Addr { return nth(AgentBusAddress(a), n-1) }

// AgentAddress is agent a's fixed address on its network, after the bus
// nodes' (.3 with one node, .5 with three): the engine never hands the agent
// an address a node must take later, whichever is connected first.
func AgentAddress(m flock.Model, a flock.Agent) netip.Addr {
	return nth(AgentBusAddress(a), m.Bus.Replicas)
}

// AgentNATSURL lists every bus node on the agent's network: the agent fails
// over between them by itself.
func AgentNATSURL(m flock.Model, a flock.Agent) string {
	var urls []string
	for _, n := range m.Bus.BusNodes() {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", AgentBusNodeAddress(a, n), protocol.ClientPort))
	}
	return strings.Join(urls, ",")
}

// BusURL lists every node's client port as published on the host's loopback
// (node n on 4222+n-1).
func BusURL(m flock.Model) string {
	var urls []string
	for _, n := range m.Bus.BusNodes() {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", protocol.ClientPort+n-1))
	}
	return strings.Join(urls, ",")
}

func nth(a netip.Addr, k int) netip.Addr {
	for range k {
		a = a.Next()
	}
	return a
}
