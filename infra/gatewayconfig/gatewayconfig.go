// Package gatewayconfig renders the model gateway's configuration and the
// variables an agent gets to reach it, from the flock model, the same way for
// every stack. It holds no key: the stacks put keys where the gateway reads
// them (a file only its UID reads on Docker, a secret on aws).
package gatewayconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

// Options say how the gateway of one stack knows its callers and reaches
// its keys and the bus.
type Options struct {
	// Callers is protocol.CallersByNetwork (each agent's own network) or
	// protocol.CallersByToken (Tokens).
	Callers string
	// Tokens are the agents' gateway tokens (Callers "token"); only their
	// hashes go into the config.
	Tokens map[string]string
	// KeyEnv names the variable holding an upstream's key (aws); when nil
	// the key is the file <protocol.GatewayKeysDir>/<name>.
	KeyEnv func(upstream string) string
	// NATSURL, and NkeyFile or NkeyEnv, reach the bus as the gateway.
	NATSURL  string
	NkeyFile string
	NkeyEnv  string
	// Pool are the flock's own ranges, which the egress broker never dials
	// whatever a rule says; empty: the dev pool (m.Network.Pool). The aws
	// stack gives its VPC's range.
	Pool []string
}

// KeyEnvVar is the variable an upstream's key travels in on aws.
func KeyEnvVar(upstream string) string {
	return "FLOCK_GATEWAY_KEY_" + strings.ToUpper(strings.ReplaceAll(upstream, "-", "_"))
}

// Config is the gateway's configuration for the flock.
func Config(m flock.Model, opt Options) (protocol.GatewayConfig, error) {
	if !m.Gateway.Enabled() {
		return protocol.GatewayConfig{}, fmt.Errorf("gatewayconfig: the flock has no gateway")
	}
	c := protocol.GatewayConfig{V: 1, Flock: m.Name, Callers: opt.Callers, NATSURL: opt.NATSURL, NkeyFile: opt.NkeyFile, NkeyEnv: opt.NkeyEnv,
		OTLPEndpoint: m.OTLP.Endpoint}
	for _, up := range m.Gateway.Upstreams {
		u := protocol.GatewayUpstream{Name: up.Name, API: up.API, Prices: up.Prices, URL: up.URL, KeyHeader: up.KeyHeader, KeyPrefix: up.KeyPrefix}
		if opt.KeyEnv != nil {
			u.KeyEnv = opt.KeyEnv(up.Name)
		} else {
			u.KeyFile = path.Join(protocol.GatewayKeysDir, up.Name)
		}
		c.Upstreams = append(c.Upstreams, u)
	}
	for _, a := range m.Agents {
		ga := protocol.GatewayAgent{ID: a.ID, BudgetTokens: a.Gateway.BudgetTokens, BudgetWindow: a.Gateway.BudgetWindow}
		switch opt.Callers {
		case protocol.CallersByNetwork:
			ga.Network = a.Subnet.String()
		case protocol.CallersByToken:
			t := opt.Tokens[a.ID]
			if t == "" {
				return protocol.GatewayConfig{}, fmt.Errorf("gatewayconfig: no gateway token for agent %q", a.ID)
			}
			sum := sha256.Sum256([]byte(t))
			ga.TokenSHA256 = hex.EncodeToString(sum[:])
		default:
			return protocol.GatewayConfig{}, fmt.Errorf("gatewayconfig: callers must be %q or %q (got %q)", protocol.CallersByNetwork, protocol.CallersByToken, opt.Callers)
		}
		c.Agents = append(c.Agents, ga)
	}
	if len(m.Gateway.EgressRules) > 0 {
		c.Egress = egressConfig(m, opt)
	}
	return c, nil
}

// egressConfig is the broker's part: the rules, each credential read from
// the file or variable its secret travels in, the CA seed likewise, and the
// pool the gateway never dials.
func egressConfig(m flock.Model, opt Options) *protocol.GatewayEgress {
	e := &protocol.GatewayEgress{Pool: slices.Clone(opt.Pool)}
	if len(e.Pool) == 0 {
		e.Pool = []string{m.Network.Pool.Masked().String()}
	}
	for _, r := range m.Gateway.EgressRules {
		r.Agents = slices.Clone(r.Agents)
		if r.Credential != nil {
			cred := *r.Credential
			if opt.KeyEnv != nil {
				cred.Env = EgressCredentialEnvVar(cred.Secret)
			} else {
				cred.File = path.Join(protocol.GatewayKeysDir, EgressCredentialFile(cred.Secret))
			}
			cred.Secret = ""
			r.Credential = &cred
		}
		e.Rules = append(e.Rules, r)
	}
	if m.Gateway.Brokered() {
		if opt.KeyEnv != nil {
			e.CASeedEnv = EgressCASeedEnvVar
		} else {
			e.CASeedFile = path.Join(protocol.GatewayKeysDir, protocol.GatewayEgressCASeed)
		}
	}
	return e
}

// EgressCredentialFile is the file in protocol.GatewayKeysDir that holds the
// egress credential of config key flock:<secret> on dev.
func EgressCredentialFile(secret string) string {
	return protocol.GatewayEgressCredentialPrefix + secret
}

// EgressCredentialEnvVar is the variable it travels in on aws.
func EgressCredentialEnvVar(secret string) string {
	return "FLOCK_GATEWAY_EGRESS_" + strings.ToUpper(secret)
}

// EgressCASeedEnvVar holds the egress CA's seed on aws.
const EgressCASeedEnvVar = "FLOCK_GATEWAY_EGRESS_CA_SEED"

// EgressRulesJSON is the gateway's egress rules as its config holds them
// (credentials by file, no value): "" without rules.
func EgressRulesJSON(m flock.Model) (string, error) {
	c, err := Config(m, Options{Callers: protocol.CallersByNetwork})
	if err != nil || c.Egress == nil {
		return "", err
	}
	b, err := json.Marshal(c.Egress.Rules)
	return string(b), err
}

// Render is Config as the JSON file the gateway reads.
func Render(m flock.Model, opt Options) ([]byte, error) {
	c, err := Config(m, opt)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// AgentEnv is what agent a gets to reach the gateway at base
// (http://host:port): FLOCK_GATEWAY_URL, the SDKs' base URLs for the
// well-known upstreams, and, when an egress rule names it, the proxy
// variables in both cases (libcurl, hence git, reads only the lower-case
// ones) with noProxy (the gateway's and the bus's addresses) exempt; with a
// brokered rule, the flock's egress CA (egressCA, PEM) and the variables
// the usual tools read a CA bundle from, all naming the bundle the runtime
// writes. None when the flock has no gateway.
func AgentEnv(m flock.Model, a flock.Agent, base string, noProxy []string, egressCA string) []string {
	if !m.Gateway.Enabled() {
		return nil
	}
	env := []string{protocol.EnvGatewayURL + "=" + base}
	for _, up := range m.Gateway.Upstreams {
		switch up.Name {
		case "anthropic":
			env = append(env, protocol.EnvAnthropicBaseURL+"="+base+"/anthropic")
		case "openai":
			env = append(env, protocol.EnvOpenAIBaseURL+"="+base+"/openai/v1")
		}
	}
	rules := m.Gateway.EgressFor(a.ID)
	if len(rules) == 0 {
		return env
	}
	np := strings.Join(noProxy, ",")
	env = append(env,
		protocol.EnvHTTPSProxy+"="+base, "https_proxy="+base,
		protocol.EnvHTTPProxy+"="+base, "http_proxy="+base,
		protocol.EnvNoProxy+"="+np, "no_proxy="+np)
	brokered := slices.ContainsFunc(rules, func(r egress.Rule) bool { return !r.Tunnel })
	if brokered && egressCA != "" {
		env = append(env, protocol.EnvEgressCA+"="+egressCA)
		for _, v := range protocol.EgressCAVars {
			env = append(env, v+"="+protocol.EgressCABundleFile)
		}
	}
	return env
}

// KeyVars are the SDKs' key variables an agent gets for the well-known
// upstreams (ANTHROPIC_API_KEY, OPENAI_API_KEY): a stock SDK configured by
// the environment alone refuses to call without one. The stacks fill them
// with GatewayPlaceholderKey (dev) or the agent's gateway token (aws). None
// when the flock has no gateway.
func KeyVars(m flock.Model) []string {
	if !m.Gateway.Enabled() {
		return nil
	}
	var out []string
	for _, up := range m.Gateway.Upstreams {
		switch up.Name {
		case "anthropic":
			out = append(out, protocol.EnvAnthropicAPIKey)
		case "openai":
			out = append(out, protocol.EnvOpenAIAPIKey)
		}
	}
	return out
}
