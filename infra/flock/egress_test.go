package flock

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol/egress"
)

func egressFlock(rules []egress.Rule, allow ...[]string) Config {
	c := Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-1"}, {ID: "agent-2"}},
		Gateway: ModelGatewayConfig{Upstreams: map[string]UpstreamConfig{"anthropic": {}}, Egress: rules}}
	for i, hosts := range allow {
		c.Agents[i].Gateway = &AgentModelGatewayConfig{AllowHosts: hosts}
	}
	return c
}

// Bad rules fail the preview naming the config key and the rule, including
// an allowHosts entry that cannot be a tunnel rule and one that collides
// with the operator's rule.
func TestEgressConfigErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty host", egressFlock([]egress.Rule{{Host: ""}}), "flock:gateway.egress[0].host:"},
		{"public suffix", egressFlock([]egress.Rule{{Host: "*.github.io"}}), "flock:gateway.egress[0].host:"},
		{"unknown agent", egressFlock([]egress.Rule{{Host: "a.example.com", Agents: []string{"agent-9"}}}), `flock:gateway.egress[0].agents[0]: "agent-9" is not an agent of the flock`},
		{"private range in the pool", egressFlock([]egress.Rule{{Host: "a.example.com", PrivateRanges: []string{"10.210.0.0/24"}}}), "flock:gateway.egress[0].privateRanges[0]:"},
		{"credential over plain http", egressFlock([]egress.Rule{{Host: "a.example.com", PlainHTTP: true, Credential: &egress.Credential{Header: "Authorization", Secret: "tok"}}}), "flock:gateway.egress[0].credential:"},
		{"an IP in allowHosts", egressFlock(nil, []string{"10.0.0.5:443"}), "flock:agents[0].gateway.allowHosts[0].host:"},
		{"allowHosts over a rule", egressFlock([]egress.Rule{{Host: "pypi.org"}}, []string{"pypi.org:443"}), "flock:agents[0].gateway.allowHosts[0]"},
		{"unknown preset", egressFlock([]egress.Rule{{Preset: "gitlab"}}), "flock:gateway.egress[0].preset: must be one of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want %q in:\n%v", c.want, err)
			}
		})
	}
}

func TestEgressRulesExpandAndScope(t *testing.T) {
	m, err := egressFlock([]egress.Rule{{Preset: "pypi", Agents: []string{"agent-2"}}}, []string{"Git.Example.com:443"}).Validate()
	if err != nil {
		t.Fatal(err)
	}
	g := m.Gateway
	if !g.EgressConfigured || !g.Brokered() || len(g.EgressRules) < 3 {
		t.Fatalf("rules %+v", g.EgressRules)
	}
	for _, r := range g.EgressFor("agent-1") {
		if r.Host != "git.example.com" || !r.Tunnel {
			t.Errorf("agent-1 may use %+v: only its own tunnel", r)
		}
	}
	var hosts []string
	for _, r := range g.EgressFor("agent-2") {
		hosts = append(hosts, r.Host)
	}
	if h := strings.Join(hosts, ","); !strings.Contains(h, "pypi.org") || !strings.Contains(h, "files.pythonhosted.org") || strings.Contains(h, "git.example.com") {
		t.Errorf("agent-2's hosts: %s", h)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "flock:agents[0].gateway.allowHosts[0] (git.example.com:443) is a blind tunnel") {
		t.Errorf("warnings %q", m.Warnings)
	}
	// No rules, no allowHosts: no egress at all.
	if m, err := egressFlock(nil).Validate(); err != nil || m.Gateway.EgressRules != nil || m.Gateway.Brokered() || len(m.Warnings) != 0 {
		t.Errorf("no egress: %+v %v", m.Gateway.EgressRules, err)
	}
	// Rules without a gateway: refused naming the upstreams.
	c := egressFlock([]egress.Rule{{Host: "a.example.com"}})
	c.Gateway.Upstreams = nil
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), "flock:gateway.upstreams: is required with budgetTokens, budgetWindow, allowHosts or egress") {
		t.Errorf("egress without a gateway: %v", err)
	}
}
