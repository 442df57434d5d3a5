package rules

import (
	"regexp"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

// The model gateway's invariants on the dev target: the egress network (the
// only one with a route out) holds the gateway alone, and no agent holds a
// model key.

// keyName and keyValue spot a credential in an agent's environment: a
// variable named like one, or a value shaped like a provider's key.
var (
	keyName  = regexp.MustCompile(`(?i)(API_?KEY|SECRET|PASSWORD|PASSWD|ACCESS_KEY|AUTH_TOKEN)`)
	keyValue = regexp.MustCompile(`^(sk-|sk_|AKIA|ASIA|ghp_|gho_|github_pat_|xox[abp]-|AIza)`)
)

// placeholderVar are the SDKs' key variables that may hold
// protocol.GatewayPlaceholderKey, and only that.
var placeholderVar = map[string]bool{protocol.EnvAnthropicAPIKey: true, protocol.EnvOpenAIAPIKey: true}

// agentEnvKeyFindings checks one agent's environment (NAME=value entries).
func agentEnvKeyFindings(r Resource, env []string) []Finding {
	const fix = "give agents no model or cloud key: the gateway holds the keys (flock:gateway.upstreams, keys as secret config) and agents reach the model through FLOCK_GATEWAY_URL / ANTHROPIC_BASE_URL with a dummy key"
	var out []Finding
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		switch {
		case placeholderVar[name] && value == protocol.GatewayPlaceholderKey:
			// What the stack gives every agent's SDKs: no credential.
		case keyName.MatchString(name):
			out = append(out, r.finding(fix, "gives the agent the variable %s, named like a credential", name))
		case keyValue.MatchString(value):
			out = append(out, r.finding(fix, "gives the agent %s with a value shaped like a provider's key", name))
		}
	}
	return out
}

func containerNoKeyInAgentEnv(r Resource) []Finding {
	if dockerLabels(r)[protocol.LabelRole] != protocol.RoleAgent || isUnknown(r.get("envs")) {
		return nil
	}
	return agentEnvKeyFindings(r, strs(r.get("envs")))
}

// stackNoAgentOnEgress: no agent container joins a network labelled egress,
// at creation or by a later `docker network connect` step.
func stackNoAgentOnEgress(rs []Resource) []Finding {
	const fix = "keep agents off the egress network: only the gateway joins it; agents reach the model through the gateway on their own network"
	egress := map[string]bool{}
	for _, n := range byTypeSorted(rs, TypeNetwork) {
		if dockerLabels(n)[protocol.LabelRole] == protocol.RoleEgress {
			if name := str(n.get("name")); name != "" {
				egress[name] = true
			}
		}
	}
	if len(egress) == 0 {
		return nil
	}
	var out []Finding
	agentNames := map[string]string{}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		l := dockerLabels(c)
		if l[protocol.LabelRole] != protocol.RoleAgent {
			continue
		}
		agentNames[str(c.get("name"))] = l[protocol.LabelAgent]
		for _, a := range list(c.get("networksAdvanced")) {
			if name := str(get(a, "name")); egress[name] {
				out = append(out, c.finding(fix, "puts agent %s on the egress network %q: it would have a route out", l[protocol.LabelAgent], name))
			}
		}
	}
	for _, cmd := range byTypeSorted(rs, TypeCommand) {
		create := str(cmd.get("create"))
		if !strings.Contains(create, "network connect") {
			continue
		}
		for _, f := range strings.Fields(create) {
			if !egress[f] {
				continue
			}
			for name, id := range agentNames {
				if name != "" && containsField(create, name) {
					out = append(out, cmd.finding(fix, "connects agent %s to the egress network %q", id, f))
				}
			}
		}
	}
	return out
}

func containsField(s, field string) bool {
	for _, f := range strings.Fields(strings.NewReplacer(";", " ", "|", " ").Replace(s)) {
		if f == field {
			return true
		}
	}
	return false
}
