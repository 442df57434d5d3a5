package flock

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestGatewayConfig(t *testing.T) {
	budget, big := int64(5000), int64(-1)
	c := Config{Target: "docker", Agents: []AgentConfig{
		{ID: "agent-1", Gateway: &AgentModelGatewayConfig{BudgetTokens: &big, AllowHosts: []string{"pypi.org"}}},
		{ID: "agent-2", Gateway: &AgentModelGatewayConfig{AllowHosts: []string{"*.github.com:443"}}},
		{ID: "agent-3"},
	}, Gateway: ModelGatewayConfig{
		Upstreams: map[string]UpstreamConfig{
			"anthropic": {},
			"Bad_Name":  {},
			"local":     {KeyHeader: "x-api-key"},
			"evil":      {URL: "https://user:pw@example.com", KeyHeader: "x-api-key", KeySecret: "evil key", API: "anthropic", Prices: map[string]int64{"tool:web_search": 10}},
			"priced":    {URL: "https://example.com", KeyHeader: "x-api-key", API: "openai", Prices: map[string]int64{"batches": 10, "GET /v1/models": -1}},
		},
		BudgetTokens: &budget,
	}}
	_, err := c.Validate()
	want := []string{
		`flock:gateway.upstreams.Bad_Name: the upstream's name must match`,
		`flock:gateway.upstreams.evil.url: must be an absolute http(s) URL with no credentials`,
		`flock:gateway.upstreams.evil.keySecret: must name a config key`,
		`flock:gateway.upstreams.local.url: is required for an upstream other than anthropic and openai`,
		`flock:gateway.upstreams.local.api: must be "anthropic" or "openai"`,
		`flock:gateway.upstreams.priced.prices["batches"]: must be "METHOD /path"`,
		`flock:gateway.upstreams.priced.prices["GET /v1/models"]: must be 0 to 1000000000 tokens per call (got -1)`,
		`flock:agents[0].gateway.budgetTokens: must be between 0 (no cap) and`,
		`flock:agents[0].gateway.allowHosts[0]: must be host:port`,
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
	var all interface{ Unwrap() []error }
	if !errors.As(err, &all) || len(all.Unwrap()) != len(want) {
		t.Errorf("want exactly %d errors (one per bad key), got:\n%v", len(want), err)
	}

	c.Gateway.Upstreams = map[string]UpstreamConfig{"anthropic": {}, "local": {URL: "http://10.0.0.1:9090", KeyHeader: "x-api-key", KeySecret: "localKey", API: "openai"}}
	c.Agents[0].Gateway = &AgentModelGatewayConfig{AllowHosts: []string{"PyPI.org:443"}}
	m, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	g := m.Gateway
	if len(g.Upstreams) != 2 || !reflect.DeepEqual(g.Upstreams[0], Upstream{Name: "anthropic", URL: "https://api.anthropic.com", KeyHeader: "x-api-key", KeySecret: "anthropicApiKey", API: "anthropic"}) || g.Upstreams[1].KeySecret != "localKey" || g.Upstreams[1].API != "openai" {
		t.Errorf("upstreams %+v", g.Upstreams)
	}
	if g.Slot != 8191 || g.UID != 28191 || g.Net != netip.MustParsePrefix("10.210.255.248/29") || g.Egress != netip.MustParsePrefix("10.210.255.240/29") {
		t.Errorf("gateway slot %d uid %d net %s egress %s", g.Slot, g.UID, g.Net, g.Egress)
	}
	a1, a3 := m.Agents[0].Gateway, m.Agents[2].Gateway
	if a1.BudgetTokens != 5000 || strings.Join(a1.AllowHosts, ",") != "pypi.org:443" || a3.BudgetTokens != 5000 || a3.AllowHosts != nil {
		t.Errorf("agent-1 %+v agent-3 %+v", a1, a3)
	}
	if a1.AllowHostsKey != "flock:agents[0].gateway.allowHosts" || a3.AllowHostsKey != "" {
		t.Errorf("allow-list keys: agent-1 %q agent-3 %q", a1.AllowHostsKey, a3.AllowHostsKey)
	}
	c.Gateway.AllowHosts = []string{"example.com:443"}
	if m, err = c.Validate(); err != nil || m.Agents[2].Gateway.AllowHostsKey != "flock:gateway.allowHosts" || m.Agents[0].Gateway.AllowHostsKey != "flock:agents[0].gateway.allowHosts" {
		t.Errorf("allow-list keys with a stack allow-list: %+v %+v (%v)", m.Agents[0].Gateway, m.Agents[2].Gateway, err)
	}
	if GatewayAddress(m.Agents[0].Subnet).String() != "10.210.0.14" {
		t.Errorf("gateway address on agent-1's network: %s", GatewayAddress(m.Agents[0].Subnet))
	}
}

// The pool's last three slots are the flock's own networks (the gateway's
// two, the services'), with a gateway or without: no agent may take them,
// and no agent may be called gateway.
func TestTheFlockReservesItsSlots(t *testing.T) {
	slot := 8189
	c := Config{Target: "docker", Agents: []AgentConfig{{ID: "gateway", Slot: &slot}, {ID: "late", Slot: &slot}, {ID: "services", Slot: ptr(7)}},
		Gateway: ModelGatewayConfig{Upstreams: map[string]UpstreamConfig{"anthropic": {}}}}
	_, err := c.Validate()
	for _, w := range []string{`flock:agents[0].id: "gateway" is reserved`, `flock:agents[2].id: "services" is reserved`, `flock:agents[1].slot: must be between 1 and 8188 (the per-agent subnets in flock:network.pool, less the last three, which are the flock's own: the gateway's and the services') (got 8189)`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
	c.Gateway = ModelGatewayConfig{}
	c.Agents = c.Agents[1:2]
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), "flock:agents[0].slot: must be between 1 and 8188") {
		t.Errorf("without a gateway slot 8189 is still the services': %v", err)
	}
	slot = 8188
	m, err := c.Validate()
	if err != nil || m.Services.Slot != 8189 || m.Services.UID != DefaultUIDBase+8189 || m.Services.Net.String() != "10.210.255.232/29" {
		t.Errorf("the last slot an agent may take, and the services': %+v %v", m.Services, err)
	}
	c.Agents[0].Gateway = &AgentModelGatewayConfig{}
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), "flock:agents[0].gateway: the flock has no gateway") {
		t.Errorf("agent gateway settings without a gateway: %v", err)
	}
}

// A budget window is the stack's unless an agent has its own; "none" turns
// the stack's off for one agent; anything else is refused naming the key.
func TestGatewayBudgetWindow(t *testing.T) {
	day, none, bad := "day", "none", "weekly"
	c := Config{Target: "docker", Agents: []AgentConfig{
		{ID: "agent-1"},
		{ID: "agent-2", Gateway: &AgentModelGatewayConfig{BudgetWindow: &none}},
		{ID: "agent-3", Gateway: &AgentModelGatewayConfig{BudgetWindow: &bad}},
	}, Gateway: ModelGatewayConfig{Upstreams: map[string]UpstreamConfig{"anthropic": {}}, BudgetWindow: &day}}
	_, err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `flock:agents[2].gateway.budgetWindow: must be "day"`) || !strings.Contains(err.Error(), `(got "weekly")`) {
		t.Fatalf("a bad window: %v", err)
	}
	c.Agents[2].Gateway = nil
	m, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if w := []string{m.Agents[0].Gateway.BudgetWindow, m.Agents[1].Gateway.BudgetWindow, m.Agents[2].Gateway.BudgetWindow}; !reflect.DeepEqual(w, []string{"day", "", "day"}) {
		t.Errorf("windows %q", w)
	}
	c.Gateway = ModelGatewayConfig{BudgetWindow: &day}
	if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), "flock:gateway.upstreams: is required with budgetTokens, budgetWindow, allowHosts or egress") {
		t.Errorf("a window without a gateway: %v", err)
	}
}

func ptr(n int) *int { return &n }

// Span export goes through the gateway: with one, an endpoint is taken as
// given; an error never echoes a password.
func TestOTLPEndpointWithAGateway(t *testing.T) {
	c := base(2)
	c.Gateway.Upstreams = map[string]UpstreamConfig{"anthropic": {}}
	c.OTLP.Endpoint = "http://collector.internal:4318"
	m, err := c.Validate()
	if err != nil || m.OTLP.Endpoint != "http://collector.internal:4318" {
		t.Fatalf("model %+v, err %v", m.OTLP, err)
	}
	c.OTLP.Endpoint = "http://me:hunter2@collector"
	if _, err := c.Validate(); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("an endpoint with a password: %v", err)
	}
	c.OTLP.Endpoint = ""
	if m, err := c.Validate(); err != nil || m.OTLP.Endpoint != "" {
		t.Fatalf("no endpoint: %+v, %v", m.OTLP, err)
	}
}
