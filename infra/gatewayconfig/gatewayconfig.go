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
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
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
		ga := protocol.GatewayAgent{ID: a.ID, BudgetTokens: a.Gateway.BudgetTokens, BudgetWindow: a.Gateway.BudgetWindow, AllowConnect: a.Gateway.AllowHosts}
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
	return c, nil
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
// well-known upstreams, and, when it has an allow-list, the proxy variables
// with noProxy (the gateway's and the bus's addresses) exempt. None when the
// flock has no gateway.
func AgentEnv(m flock.Model, a flock.Agent, base string, noProxy []string) []string {
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
	if len(a.Gateway.AllowHosts) > 0 {
		env = append(env,
			protocol.EnvHTTPSProxy+"="+base, protocol.EnvHTTPProxy+"="+base,
			protocol.EnvNoProxy+"="+strings.Join(noProxy, ","))
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
