package stacks_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

const egressToken = "ghp-egress-test-only-9e3a"

// The dev stack with egress rules: the credential reaches the gateway's
// config step only, as a secret; agents a rule names get the proxy in both
// cases and, for a brokered rule, the flock's CA and the bundle variables;
// the CA does not change between two runs (derived from flock:busSecret).
func TestDevEgress(t *testing.T) {
	cfg := func() capture.Config {
		c := withGateway(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"agent-2"},{"id":"agent-3","gateway":{"allowHosts":["pypi.org:443"]}}]`},
			`, "egress": [{"preset": "github", "agents": ["agent-1"], "credential": {"basicUser": "x-access-token", "secret": "githubToken"}}]`)
		c["flock:githubToken"] = egressToken
		return c
	}
	s, err := capture.RunStack("dev", cfg(), "flock:anthropicApiKey", "flock:githubToken")
	if err != nil {
		t.Fatal(err)
	}
	agents := agentContainers(t, s)
	one, two, three := envOf(agents["agent-1"]), envOf(agents["agent-2"]), envOf(agents["agent-3"])
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
		if one[k] == "" || three[k] == "" {
			t.Errorf("%s: agent-1 %q, agent-3 %q", k, one[k], three[k])
		}
		if _, has := two[k]; has {
			t.Errorf("agent-2 (no rule) has %s", k)
		}
	}
	if !strings.HasPrefix(one[protocol.EnvEgressCA], "-----BEGIN CERTIFICATE-----") {
		t.Errorf("agent-1 lacks the egress CA: %q", one[protocol.EnvEgressCA])
	}
	for _, k := range protocol.EgressCAVars {
		if one[k] != protocol.EgressCABundleFile {
			t.Errorf("agent-1 %s=%q, want the bundle", k, one[k])
		}
		if _, has := three[k]; has {
			t.Errorf("agent-3 (a tunnel only) has %s", k)
		}
	}
	// The credential: in the gateway's config step, a secret, nowhere else.
	step, _ := s.Get(capture.TypeCommand, "flock-gateway-config")
	in := step.Inputs["stdin"]
	if !in.IsSecret() || !strings.Contains(in.SecretValue().Element.StringValue(), base64.StdEncoding.EncodeToString([]byte(egressToken))) {
		t.Errorf("the gateway config step must carry the egress credential as a secret")
	}
	noPlainInput(t, s, egressToken)
	// Deterministic: a second run gives every agent the same CA.
	again, err := capture.RunStack("dev", cfg(), "flock:anthropicApiKey", "flock:githubToken")
	if err != nil {
		t.Fatal(err)
	}
	if envOf(agentContainers(t, again)["agent-1"])[protocol.EnvEgressCA] != one[protocol.EnvEgressCA] {
		t.Error("the egress CA changed between two runs")
	}

	// The credential as plain text, or missing: refused naming the key.
	if _, err := capture.RunStack("dev", cfg(), "flock:anthropicApiKey"); err == nil || !strings.Contains(err.Error(), "flock:githubToken: must be stored as a secret") || strings.Contains(err.Error(), egressToken) {
		t.Errorf("a plain-text egress credential: %v", err)
	}
	c := cfg()
	delete(c, "flock:githubToken")
	if _, err := capture.RunStack("dev", c, "flock:anthropicApiKey"); err == nil || !strings.Contains(err.Error(), "flock:githubToken: is required: an egress rule's credential") {
		t.Errorf("a missing egress credential: %v", err)
	}
	// A bad rule fails the preview naming the key and the rule.
	c = withGateway(count(2), `, "egress": [{"host": "*"}]`)
	if _, err := capture.RunStack("dev", c, "flock:anthropicApiKey"); err == nil || !strings.Contains(err.Error(), "flock:gateway.egress[0].host:") {
		t.Errorf("a bad rule: %v", err)
	}
}
