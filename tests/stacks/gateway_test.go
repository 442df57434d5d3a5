package stacks_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// testKey is a distinctive fake upstream key: it must appear nowhere but in
// the gateway's secret config step.
const testKey = "sk-ant-test-only-KEY-4f1c9e"

// withGateway gives c a gateway with the anthropic upstream and its key as a
// secret.
func withGateway(c capture.Config, extra string) capture.Config {
	c["flock:gateway"] = `{"upstreams": {"anthropic": {}}` + extra + `}`
	c["flock:anthropicApiKey"] = testKey
	return c
}

func devGateway(t *testing.T, c capture.Config) *capture.Stack {
	t.Helper()
	s, err := capture.RunStack("dev", c, "flock:anthropicApiKey")
	if err != nil {
		t.Fatalf("dev stack with a gateway: %v", err)
	}
	return s
}

func envOf(c capture.Resource) map[string]string {
	out := map[string]string{}
	for _, e := range c.Plain()["envs"].([]any) {
		k, v, _ := strings.Cut(e.(string), "=")
		out[k] = v
	}
	return out
}

// plainStrings is every string of v that is not under a secret.
func plainStrings(v resource.PropertyValue, out *[]string) {
	switch {
	case v.IsSecret():
	case v.IsString():
		*out = append(*out, v.StringValue())
	case v.IsArray():
		for _, e := range v.ArrayValue() {
			plainStrings(e, out)
		}
	case v.IsObject():
		for _, e := range v.ObjectValue() {
			plainStrings(e, out)
		}
	}
}

func TestDevGateway(t *testing.T) {
	s := devGateway(t, withGateway(capture.Config{"flock:agentCount": "3"}, `, "budgetTokens": 5000`))

	nets := map[string]capture.Resource{}
	for _, n := range s.ByType(capture.TypeNetwork) {
		nets[n.Name] = n
	}
	egress, ok := nets["flock-egress"]
	if !ok || egress.Plain()["internal"] == true || label(egress, "ai-flock.role") != "egress" {
		t.Fatalf("egress network: %v", egress.Plain())
	}
	// The pool's last two slots: 10.210.255.240/29 (egress), .248/29 (the gateway's own).
	if got := egress.Plain()["ipamConfigs"].([]any)[0].(map[string]any)["subnet"]; got != "10.210.255.240/29" {
		t.Errorf("egress subnet %v", got)
	}
	own := nets["flock-gateway-net"]
	if own.Plain()["internal"] != true {
		t.Errorf("the gateway's network to the bus must be internal: %v", own.Plain())
	}

	gw, ok := s.Get(capture.TypeContainer, "flock-gateway")
	if !ok {
		t.Fatal("no gateway container")
	}
	p := gw.Plain()
	if p["user"] != "28191:28191" || p["readOnly"] != true || label(gw, "ai-flock.role") != "gateway" {
		t.Errorf("gateway: user %v readOnly %v role %q", p["user"], p["readOnly"], label(gw, "ai-flock.role"))
	}
	joined := networksJoined(gw)
	if strings.Join(joined, " ") != "flock-egress@10.210.255.246 flock-gateway-net@10.210.255.254" {
		t.Errorf("gateway joins %v", joined)
	}
	for _, e := range p["envs"].([]any) {
		if strings.Contains(e.(string), testKey) {
			t.Errorf("the key is in the gateway's environment: %v", e)
		}
	}

	// Every agent: the gateway joined to its network at the last address,
	// the variables pointing there, no key, no proxy (no allow-list).
	agents := agentContainers(t, s)
	for i, id := range []string{"agent-1", "agent-2", "agent-3"} {
		link, ok := s.Get(capture.TypeCommand, "flock-"+id+"-gateway-link")
		gwIP := fmt.Sprintf("10.210.0.%d", 8*(i+1)+6)
		if !ok || !strings.Contains(link.String("create"), "--ip "+gwIP+" --alias gateway flock-"+id+"-net flock-gateway") {
			t.Errorf("%s: gateway link %q", id, link.String("create"))
		}
		env := envOf(agents[id])
		if env["FLOCK_GATEWAY_URL"] != "http://"+gwIP+":8080" || env["ANTHROPIC_BASE_URL"] != "http://"+gwIP+":8080/anthropic" {
			t.Errorf("%s: gateway variables %v", id, env)
		}
		if _, has := env["HTTPS_PROXY"]; has {
			t.Errorf("%s: a proxy without an allow-list: %v", id, env)
		}
		// The SDKs' key: the placeholder, so a stock SDK calls; no other.
		if env[protocol.EnvAnthropicAPIKey] != protocol.GatewayPlaceholderKey {
			t.Errorf("%s: %s=%q, want the placeholder", id, protocol.EnvAnthropicAPIKey, env[protocol.EnvAnthropicAPIKey])
		}
		for k, v := range env {
			if strings.Contains(v, testKey) || strings.Contains(k, "API_KEY") && k != protocol.EnvAnthropicAPIKey {
				t.Errorf("%s: %s=%s", id, k, v)
			}
		}
	}

	// The key is in the gateway's config step only, as a secret (base64 on
	// its stdin), and in no plain input anywhere.
	step, _ := s.Get(capture.TypeCommand, "flock-gateway-config")
	if in := step.Inputs["stdin"]; !in.IsSecret() || !strings.Contains(in.SecretValue().Element.StringValue(), base64.StdEncoding.EncodeToString([]byte(testKey))) {
		t.Errorf("the gateway config step must carry the key as a secret")
	}
	noPlainInput(t, s, testKey)
}

// noPlainInput fails t for each resource holding secret (or its base64)
// in an input that is not a secret.
func noPlainInput(t *testing.T, s *capture.Stack, secret string) {
	t.Helper()
	for _, r := range s.Resources {
		var strs []string
		for _, v := range r.Inputs {
			plainStrings(v, &strs)
		}
		for _, v := range strs {
			if strings.Contains(v, secret) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(secret))) {
				t.Errorf("%s holds a secret in a plain input", r.Name)
			}
		}
	}
}

func TestDevGatewayProxyOnlyWithAllowList(t *testing.T) {
	s := devGateway(t, withGateway(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1","gateway":{"allowHosts":["pypi.org:443"]}},{"id":"agent-2"}]`}, ""))
	agents := agentContainers(t, s)
	one, two := envOf(agents["agent-1"]), envOf(agents["agent-2"])
	if one["HTTPS_PROXY"] != "http://10.210.0.14:8080" || one["NO_PROXY"] != "10.210.0.14,10.210.0.10" {
		t.Errorf("agent-1 (allow-list): %v", one)
	}
	if _, has := two["HTTPS_PROXY"]; has {
		t.Errorf("agent-2 (none): %v", two)
	}
}

func TestGatewayKeyRules(t *testing.T) {
	base := func() capture.Config {
		c, err := capture.StackConfig("dev")
		if err != nil {
			t.Fatal(err)
		}
		c["flock:gateway"] = `{"upstreams": {"anthropic": {}, "local": {"url": "http://10.0.0.1:9090", "keyHeader": "x-api-key", "keySecret": "localKey", "api": "openai"}}}`
		return c
	}
	c, secrets := capture.WithSecret(base())
	c["flock:localKey"] = "k2"
	_, err := capture.Run("dev", c, append(secrets, "flock:localKey")...)
	if err == nil || !strings.Contains(err.Error(), "flock:anthropicApiKey: is required: the key of upstream \"anthropic\"") {
		t.Errorf("missing key: %v", err)
	}
	c["flock:anthropicApiKey"] = testKey
	_, err = capture.Run("dev", c, append(secrets, "flock:localKey")...)
	if err == nil || !strings.Contains(err.Error(), "flock:anthropicApiKey: must be stored as a secret") || strings.Contains(err.Error(), testKey) {
		t.Errorf("plain-text key: %v", err)
	}
	_, err = capture.Run("dev", c, append(secrets, "flock:localKey", "flock:anthropicApiKey")...)
	if err != nil {
		t.Errorf("both keys secret: %v", err)
	}
}

// Adding an agent to a flock with a gateway adds its own steps and changes
// the gateway's config step and the bus's: the gateway container stays.
func TestAddingAnAgentReplacesNoGateway(t *testing.T) {
	three := devGateway(t, withGateway(count(3), ""))
	four := devGateway(t, withGateway(count(4), ""))
	changed, removed, added := changedBetween(three, four)
	if len(removed) != 0 {
		t.Errorf("removed: %v", removed)
	}
	slices.Sort(changed)
	if strings.Join(changed, " ") != "flock-bus-config flock-gateway-config" {
		t.Errorf("changed %v; want only the bus and gateway config steps", changed)
	}
	for _, want := range []string{"flock-agent-4", "flock-agent-4-gateway-link", "flock-agent-4-bus-link"} {
		if !slices.Contains(added, want) {
			t.Errorf("agent-4 lacks %s (added %v)", want, added)
		}
	}
}
