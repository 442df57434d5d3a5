package stacks_test

import (
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/gatewayconfig"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// awsEgressStack is the aws stack with three agents and egress rules:
// GitHub with an injected credential for agent-1, a registry on 8443 and a
// plain-HTTP mirror for agent-2, nothing for agent-3.
func awsEgressStack(t *testing.T, drop ...string) (*capture.Stack, error) {
	t.Helper()
	cfg := withGateway(capture.Config{"flock:agentCount": "3"}, `, "egress": [
		{"preset": "github", "agents": ["agent-1"], "credential": {"basicUser": "x-access-token", "secret": "githubToken"}},
		{"host": "registry.example.com", "port": 8443, "agents": ["agent-2"]},
		{"host": "mirror.example.org", "plainHttp": true, "agents": ["agent-2"]}]`)
	cfg["flock:githubToken"] = egressToken
	secrets := []string{"flock:anthropicApiKey", "flock:githubToken"}
	for _, k := range drop {
		secrets = slices.DeleteFunc(secrets, func(s string) bool { return s == k })
	}
	return capture.RunStack("aws", cfg, secrets...)
}

// The aws stack with egress rules: the gateway gets the rules' credential
// and its CA's seed as secrets of its own, a way out on each rule's port,
// and the rules' hosts in the VPC's DNS firewall; an agent a rule names
// gets the proxy variables from a secret of its own (its token is in the
// URL), the flock's CA and the bundle variables in its plain environment;
// an agent no rule names gets none of it.
func TestAWSEgress(t *testing.T) {
	s, err := awsEgressStack(t)
	if err != nil {
		t.Fatal(err)
	}
	// The gateway's secrets and config.
	td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-gateway-task")
	c := awsContainer(t, td)
	values := map[string]string{}
	for _, kv := range c.Environment {
		values[kv.Name] = kv.Value
	}
	for _, sec := range c.Secrets {
		for _, r := range s.ByType(awsrules.TypeSecret) {
			if r.MockARN() == sec.ValueFrom {
				v := awsGet(t, s, awsrules.TypeSecretVersion, r.Name)
				if !v.Inputs["secretString"].IsSecret() {
					t.Errorf("%s: not a Pulumi secret", r.Name)
				}
				values[sec.Name] = v.String("secretString")
			}
		}
	}
	credEnv := gatewayconfig.EgressCredentialEnvVar("githubToken")
	if values[credEnv] != egressToken {
		t.Errorf("the gateway's %s holds %q, want the credential", credEnv, values[credEnv])
	}
	seed, _ := credentials.EgressCASeed([]byte(capture.TestSecret), "flock")
	if len(seed) == 0 || values[gatewayconfig.EgressCASeedEnvVar] != hex.EncodeToString(seed) {
		t.Errorf("the gateway's %s does not hold the CA seed", gatewayconfig.EgressCASeedEnvVar)
	}
	raw, ok, err := protocol.DecodeEnv(protocol.EnvGatewayConfigData, func(k string) string { return values[k] })
	if !ok || err != nil {
		t.Fatalf("gateway config does not reassemble: %v %v", ok, err)
	}
	var conf protocol.GatewayConfig
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	e := conf.Egress
	if e == nil || e.CASeedEnv != gatewayconfig.EgressCASeedEnvVar || e.CASeedFile != "" || !reflect.DeepEqual(e.Pool, []string{awsflock.DefaultCIDR.String()}) {
		t.Fatalf("gateway egress config %+v: want the seed from its variable and the VPC's range as the pool", e)
	}
	for _, r := range e.Rules {
		if r.Credential != nil && (r.Credential.Env != credEnv || r.Credential.File != "" || r.Credential.Secret != "") {
			t.Errorf("rule %s: credential %+v, want it read from %s", r.Host, r.Credential, credEnv)
		}
	}
	if strings.Contains(string(raw), egressToken) {
		t.Error("the gateway config holds the credential itself")
	}

	// A way out on each rule's port, and the hosts in the DNS firewall.
	var out []int
	for _, r := range awsSGRules(t, s) {
		if r.sg == "gateway" && r.kind == "egress" && r.peer == "[0.0.0.0/0]" {
			out = append(out, r.port)
		}
	}
	slices.Sort(out)
	if !reflect.DeepEqual(out, []int{80, 443, 8443}) {
		t.Errorf("the gateway reaches the internet on %v, want 80 (plain HTTP), 443 and 8443", out)
	}
	listR := awsGet(t, s, awsrules.TypeFirewallDomainList, "flock-dns-egress-hosts")
	var domains []string
	for _, d := range list(listR, "domains") {
		domains = append(domains, d.(string))
	}
	for _, h := range []string{"github.com", "registry.example.com", "mirror.example.org"} {
		if !slices.Contains(domains, h) {
			t.Errorf("the DNS firewall's egress list %v lacks %s", domains, h)
		}
	}

	// Agents.
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		ac := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task"))
		env := map[string]string{}
		for _, kv := range ac.Environment {
			env[kv.Name] = kv.Value
		}
		fromSecret := map[string]string{}
		for _, sec := range ac.Secrets {
			fromSecret[sec.Name] = sec.ValueFrom
		}
		for _, k := range protocol.ProxyVars {
			if _, plain := env[k]; plain {
				t.Errorf("%s: %s in the plain environment", id, k)
			}
		}
		proxy, hasProxy := s.Get(awsrules.TypeSecret, "flock-"+id+"-gateway-proxy")
		if id == "agent-3" {
			if hasProxy || fromSecret["HTTPS_PROXY"] != "" || env["NO_PROXY"] != "" || env[protocol.EnvEgressCA] != "" {
				t.Errorf("agent-3 (no rule) has a proxy: secret %v, env %v", hasProxy, env)
			}
			continue
		}
		if !hasProxy {
			t.Fatalf("%s: no proxy secret", id)
		}
		for _, k := range protocol.ProxyVars {
			if fromSecret[k] != proxy.MockARN() {
				t.Errorf("%s: %s from %q, want its proxy secret", id, k, fromSecret[k])
			}
		}
		token, _ := credentials.GatewayToken([]byte(capture.TestSecret), id)
		v := awsGet(t, s, awsrules.TypeSecretVersion, "flock-"+id+"-gateway-proxy")
		want := "http://agent:" + token + "@gateway.flock.flock.internal:8080"
		if !v.Inputs["secretString"].IsSecret() || v.String("secretString") != want || obj(proxy, "tags")["ai-flock.agent"] != id {
			t.Errorf("%s: its proxy secret holds %q, want %q as a Pulumi secret", id, v.String("secretString"), want)
		}
		if env["NO_PROXY"] != "flock.flock.internal,169.254.170.2" || env["no_proxy"] != env["NO_PROXY"] {
			t.Errorf("%s: NO_PROXY %q no_proxy %q", id, env["NO_PROXY"], env["no_proxy"])
		}
		if !strings.HasPrefix(env[protocol.EnvEgressCA], "-----BEGIN CERTIFICATE-----") {
			t.Errorf("%s lacks the egress CA", id)
		}
		for _, k := range protocol.EgressCAVars {
			if env[k] != protocol.EgressCABundleFile {
				t.Errorf("%s: %s=%q, want the bundle", id, k, env[k])
			}
		}
		var read []string
		for _, st := range awsPolicy(t, awsGet(t, s, awsrules.TypeRolePolicy, "flock-"+id+"-exec-policy"), "policy").Statement {
			if slicesContain(st.Action, "secretsmanager:GetSecretValue") {
				read = append(read, st.Resource...)
			}
		}
		if !slices.Contains(read, proxy.MockARN()) {
			t.Errorf("%s: its execution role cannot read its proxy secret (reads %v)", id, read)
		}
	}
	noPlainInput(t, s, egressToken)
	for _, id := range []string{"agent-1", "agent-2"} {
		token, _ := credentials.GatewayToken([]byte(capture.TestSecret), id)
		noPlainInput(t, s, token)
	}

	// The credential as plain text: refused naming its key, as on dev.
	if _, err := awsEgressStack(t, "flock:githubToken"); err == nil || !strings.Contains(err.Error(), "flock:githubToken: must be stored as a secret") || strings.Contains(err.Error(), egressToken) {
		t.Errorf("a plain-text egress credential: %v", err)
	}
}
