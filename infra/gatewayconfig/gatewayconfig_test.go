package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

func model(t *testing.T) flock.Model {
	budget, month := int64(500), "month"
	m, err := flock.Config{Target: "docker", Agents: []flock.AgentConfig{
		{ID: "agent-1", Gateway: &flock.AgentModelGatewayConfig{BudgetTokens: &budget, BudgetWindow: &month, AllowHosts: []string{"pypi.org:443"}}},
		{ID: "agent-2"},
	}, Gateway: flock.ModelGatewayConfig{Upstreams: map[string]flock.UpstreamConfig{"anthropic": {}, "openai": {}},
		Egress: []egress.Rule{{Host: "git.example.com", Methods: []string{"GET", "POST"}, Agents: []string{"agent-2"},
			Credential: &egress.Credential{BasicUser: "x-access-token", Secret: "gitToken"}}}}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRenderByNetworkAndByToken(t *testing.T) {
	m := model(t)
	b, err := Render(m, Options{Callers: protocol.CallersByNetwork, NATSURL: "nats://x:4222", NkeyFile: protocol.GatewayCredsFile})
	if err != nil {
		t.Fatal(err)
	}
	var c protocol.GatewayConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 2 || c.Upstreams[0].KeyFile != "/etc/flock/gateway/keys/anthropic" || c.Upstreams[1].KeyPrefix != "Bearer " {
		t.Errorf("upstreams %+v", c.Upstreams)
	}
	if a := c.Agents[0]; a.ID != "agent-1" || a.Network != "10.210.0.8/29" || a.BudgetTokens != 500 || a.BudgetWindow != "month" || a.TokenSHA256 != "" ||
		c.Agents[1].Network != "10.210.0.16/29" || c.Agents[1].BudgetTokens != 0 {
		t.Errorf("agents %+v", c.Agents)
	}
	// The egress rules: the operator's, its credential read from a key
	// file, then agent-1's allowHosts entry as a tunnel of its own; the CA
	// seed's file, the pool.
	e := c.Egress
	if e == nil || len(e.Rules) != 2 {
		t.Fatalf("egress %+v", e)
	}
	if r := e.Rules[0]; r.Host != "git.example.com" || r.Port != 443 || r.Tunnel || r.Credential == nil || r.Credential.File != "/etc/flock/gateway/keys/egress.gitToken" || r.Credential.Secret != "" {
		t.Errorf("the brokered rule: %+v %+v", r, r.Credential)
	}
	if r := e.Rules[1]; r.Host != "pypi.org" || r.Port != 443 || !r.Tunnel || strings.Join(r.Agents, ",") != "agent-1" {
		t.Errorf("the allowHosts tunnel: %+v", r)
	}
	if e.CASeedFile != "/etc/flock/gateway/keys/egress.ca-seed" || strings.Join(e.Pool, ",") != m.Network.Pool.String() {
		t.Errorf("egress CA seed %q, pool %v", e.CASeedFile, e.Pool)
	}
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "flock:agents[0].gateway.allowHosts[0] (pypi.org:443) is a blind tunnel") ||
		!strings.Contains(m.Warnings[0], `{"host":"pypi.org","port":443,"agents":["agent-1"],"tunnel":true}`) {
		t.Errorf("the allowHosts warning: %q", m.Warnings)
	}
	c2, err := Config(m, Options{Callers: protocol.CallersByToken, Tokens: map[string]string{"agent-1": "t1", "agent-2": "t2"}, KeyEnv: KeyEnvVar})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("t1"))
	if c2.Agents[0].TokenSHA256 != hex.EncodeToString(sum[:]) || c2.Agents[0].Network != "" || c2.Upstreams[0].KeyEnv != "FLOCK_GATEWAY_KEY_ANTHROPIC" ||
		c2.Egress.Rules[0].Credential.Env != "FLOCK_GATEWAY_EGRESS_GITTOKEN" || c2.Egress.CASeedEnv != EgressCASeedEnvVar {
		t.Errorf("by token: %+v", c2)
	}
	if strings.Contains(string(mustJSON(t, c2)), `"t1"`) {
		t.Error("a token (not its hash) is in the config")
	}
	if _, err := Config(m, Options{Callers: protocol.CallersByToken, Tokens: map[string]string{"agent-1": "t1"}}); err == nil || !strings.Contains(err.Error(), `agent "agent-2"`) {
		t.Errorf("a missing token: %v", err)
	}
	if c.OTLPEndpoint != "" || strings.Contains(string(b), "otlpEndpoint") {
		t.Errorf("an OTLP endpoint no one set: %q", c.OTLPEndpoint)
	}
	m.OTLP.Endpoint = "http://collector:4318"
	if c3, err := Config(m, Options{Callers: protocol.CallersByNetwork}); err != nil || c3.OTLPEndpoint != "http://collector:4318" {
		t.Errorf("the gateway is not told the OTLP endpoint: %q %v", c3.OTLPEndpoint, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAgentEnv(t *testing.T) {
	m := model(t)
	const ca = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n"
	env := strings.Join(AgentEnv(m, m.Agents[0], "http://10.210.0.14:8080", []string{"10.210.0.14", "10.210.0.10"}, ca), " ")
	proxies := "HTTPS_PROXY=http://10.210.0.14:8080 https_proxy=http://10.210.0.14:8080 HTTP_PROXY=http://10.210.0.14:8080 http_proxy=http://10.210.0.14:8080 NO_PROXY=10.210.0.14,10.210.0.10 no_proxy=10.210.0.14,10.210.0.10"
	want := "FLOCK_GATEWAY_URL=http://10.210.0.14:8080 ANTHROPIC_BASE_URL=http://10.210.0.14:8080/anthropic OPENAI_BASE_URL=http://10.210.0.14:8080/openai/v1 " + proxies
	if env != want {
		t.Errorf("agent-1 (a tunnel only: no CA):\n got %s\nwant %s", env, want)
	}
	env = strings.Join(AgentEnv(m, m.Agents[1], "http://10.210.0.14:8080", []string{"10.210.0.14", "10.210.0.10"}, ca), " ")
	if !strings.Contains(env, proxies+" FLOCK_EGRESS_CA="+ca+" SSL_CERT_FILE=/run/flock/ca-bundle.pem GIT_SSL_CAINFO=/run/flock/ca-bundle.pem") ||
		!strings.Contains(env, "NODE_EXTRA_CA_CERTS=/run/flock/ca-bundle.pem") {
		t.Errorf("agent-2 (a brokered rule): %s", env)
	}
	m.Gateway.EgressRules = nil
	if env := strings.Join(AgentEnv(m, m.Agents[1], "http://g:8080", nil, ca), " "); strings.Contains(env, "PROXY") || strings.Contains(env, "CA") {
		t.Errorf("no egress rules, no proxy: %s", env)
	}
	if k := strings.Join(KeyVars(m), " "); k != "ANTHROPIC_API_KEY OPENAI_API_KEY" {
		t.Errorf("the SDKs' key variables: %q", k)
	}
	m.Gateway = flock.ModelGateway{}
	if env := AgentEnv(m, m.Agents[0], "http://g:8080", nil, ""); env != nil {
		t.Errorf("no gateway, no variables: %v", env)
	}
	if k := KeyVars(m); k != nil {
		t.Errorf("no gateway, no key variables: %v", k)
	}
}
