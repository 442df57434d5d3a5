package flock

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/protocol/egress"
)

// EgressKey is the config key of the agents' way out: a list of rules
// (protocol/egress.Rule), each a host agents may reach through the gateway.
const EgressKey = "flock:gateway.egress"

// validateEgress checks flock:gateway.egress against the flock's agents and
// pool and turns each allowHosts entry into the blind tunnel rule it has
// always been, with a warning naming it and the rule that replaces it. It
// runs once the agents are known.
func (c Config) validateEgress(es *errs, m *Model) {
	g := &m.Gateway
	if c.Gateway.Egress == nil && !anyAllowHosts(m) {
		return
	}
	if !g.Enabled() {
		return // the gateway's and the agents' checks said so
	}
	ids := make([]string, len(m.Agents))
	for i, a := range m.Agents {
		ids[i] = a.ID
	}
	tunnels, keys := allowHostsTunnels(m, ids)
	for i, t := range tunnels {
		b, _ := json.Marshal(t)
		m.Warnings = append(m.Warnings, fmt.Sprintf("%s (%s:%d) is a blind tunnel: the gateway cannot see inside it, so an agent may use any method and path there; "+
			"replace it with a brokered rule in %s, such as %s, or write it there as this tunnel rule to keep it: %s",
			keys[i], t.Host, t.Port, EgressKey, suggestBrokered(t), b))
	}
	// One check over both, so that together they name no host:port twice
	// for one agent; each error names the setting it comes from.
	all := append(slices.Clone(c.Gateway.Egress), tunnels...)
	rules, errs := egress.Check(all, egress.Context{Key: EgressKey, Keys: append(egressKeys(len(c.Gateway.Egress)), keys...),
		Agents: ids, Pool: []netip.Prefix{m.Network.Pool}})
	for _, err := range errs {
		*es = append(*es, err)
	}
	g.EgressRules, g.EgressConfigured = rules, c.Gateway.Egress != nil
}

// EgressSecrets are the config keys (without flock:) of the rules'
// credentials, sorted, each once.
func (g ModelGateway) EgressSecrets() []string {
	var out []string
	for _, r := range g.EgressRules {
		if r.Credential != nil && !slices.Contains(out, r.Credential.Secret) {
			out = append(out, r.Credential.Secret)
		}
	}
	slices.Sort(out)
	return out
}

func egressKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s[%d]", EgressKey, i)
	}
	return out
}

func anyAllowHosts(m *Model) bool {
	for _, a := range m.Agents {
		if len(a.Gateway.AllowHosts) > 0 {
			return true
		}
	}
	return false
}

// allowHostsTunnels is one tunnel rule per host:port the agents' allowHosts
// name, for the agents that name it (none listed: every agent), each keyed by
// the first setting that named it.
func allowHostsTunnels(m *Model, ids []string) ([]egress.Rule, []string) {
	var order []string
	agents := map[string][]string{}
	keyOf := map[string]string{}
	for _, a := range m.Agents {
		for i, hp := range a.Gateway.AllowHosts {
			if _, seen := agents[hp]; !seen {
				order = append(order, hp)
				keyOf[hp] = fmt.Sprintf("%s[%d]", a.Gateway.AllowHostsKey, i)
			}
			if !slices.Contains(agents[hp], a.ID) {
				agents[hp] = append(agents[hp], a.ID)
			}
		}
	}
	var rules []egress.Rule
	var keys []string
	for _, hp := range order {
		host, port, _ := net.SplitHostPort(hp) // allowHosts checked it
		p, _ := strconv.Atoi(port)
		r := egress.Rule{Host: strings.ToLower(host), Port: p, Tunnel: true}
		if len(agents[hp]) < len(ids) {
			r.Agents = agents[hp]
		}
		rules = append(rules, r)
		keys = append(keys, keyOf[hp])
	}
	return rules, keys
}

// suggestBrokered is the brokered rule an operator would most likely write
// for a tunnel: the host, reading only.
func suggestBrokered(t egress.Rule) string {
	s := fmt.Sprintf(`{"host": %q`, t.Host)
	if t.Port != egress.DefaultPort {
		s += fmt.Sprintf(`, "port": %d`, t.Port)
	}
	if len(t.Agents) > 0 {
		s += fmt.Sprintf(`, "agents": ["%s"]`, strings.Join(t.Agents, `", "`))
	}
	return s + `, "methods": ["GET", "HEAD"]}`
}
