package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

func model(t *testing.T) flock.Model {
	budget, month := int64(500), "month"
	m, err := flock.Config{Target: "docker", Agents: []flock.AgentConfig{
		{ID: "agent-1", Gateway: &flock.AgentModelGatewayConfig{BudgetTokens: &budget, BudgetWindow: &month, AllowHosts: []string{"pypi.org:443"}}},
		{ID: "agent-2"},
	}, Gateway: flock.ModelGatewayConfig{Upstreams: map[string]flock.UpstreamConfig{"anthropic": {}, "openai": {}}}}.Validate()
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
		strings.Join(c.Agents[0].AllowConnect, ",") != "pypi.org:443" || c.Agents[1].Network != "10.210.0.16/29" || c.Agents[1].BudgetTokens != 0 {
		t.Errorf("agents %+v", c.Agents)
	}
	c2, err := Config(m, Options{Callers: protocol.CallersByToken, Tokens: map[string]string{"agent-1": "t1", "agent-2": "t2"}, KeyEnv: KeyEnvVar})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("t1"))
	if c2.Agents[0].TokenSHA256 != hex.EncodeToString(sum[:]) || c2.Agents[0].Network != "" || c2.Upstreams[0].KeyEnv != "FLOCK_GATEWAY_KEY_ANTHROPIC" {
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
	env := strings.Join(AgentEnv(m, m.Agents[0], "http://10.210.0.14:8080", []string{"10.210.0.14", "10.210.0.10"}), " ")
	want := "FLOCK_GATEWAY_URL=http://10.210.0.14:8080 ANTHROPIC_BASE_URL=http://10.210.0.14:8080/anthropic OPENAI_BASE_URL=http://10.210.0.14:8080/openai/v1 HTTPS_PROXY=http://10.210.0.14:8080 HTTP_PROXY=http://10.210.0.14:8080 NO_PROXY=10.210.0.14,10.210.0.10"
	if env != want {
		t.Errorf("agent-1 (allow-list):\n got %s\nwant %s", env, want)
	}
	if env := strings.Join(AgentEnv(m, m.Agents[1], "http://g:8080", nil), " "); strings.Contains(env, "PROXY") {
		t.Errorf("agent-2 has no allow-list: %s", env)
	}
	if k := strings.Join(KeyVars(m), " "); k != "ANTHROPIC_API_KEY OPENAI_API_KEY" {
		t.Errorf("the SDKs' key variables: %q", k)
	}
	m.Gateway = flock.ModelGateway{}
	if env := AgentEnv(m, m.Agents[0], "http://g:8080", nil); env != nil {
		t.Errorf("no gateway, no variables: %v", env)
	}
	if k := KeyVars(m); k != nil {
		t.Errorf("no gateway, no key variables: %v", k)
	}
}
