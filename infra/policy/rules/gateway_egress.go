package rules

import (
	"encoding/json"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

// The egress rules' ways out, on both stacks: the rules travel in a plain
// input (FLOCK_GATEWAY_EGRESS_RULES) where the gateway is declared.

// gatewayEgressWaysOut flags, in the dev gateway's config step or the aws
// gateway's task definition, each egress rule that is a blind tunnel (the
// gateway cannot see inside it: any method, any path, any protocol) or
// trusts roots besides the system's (the upstream's TLS is verified against
// a CA the operator names).
func gatewayEgressWaysOut(r Resource) []Finding {
	if r.Type == awsrules.TypeTaskDefinition {
		defs, _, _ := containerDefs(r) // unreadable: the task definition rules say so
		var out []Finding
		for _, c := range defs {
			for _, e := range list(c["environment"]) {
				if m := obj(e); str(m["name"]) == protocol.EnvGatewayEgressRules {
					out = append(out, egressWaysOut(r, str(m["value"]))...)
				}
			}
		}
		return out
	}
	return egressWaysOut(r, str(r.get("environment", protocol.EnvGatewayEgressRules)))
}

func egressWaysOut(r Resource, raw string) []Finding {
	if raw == "" {
		return nil
	}
	var rules []egress.Rule
	if err := json.Unmarshal([]byte(raw), &rules); err != nil {
		return []Finding{r.finding("let the stack render flock:gateway.egress", "holds egress rules that do not parse: %v", err)}
	}
	var out []Finding
	for _, rule := range rules {
		who := "every agent"
		if len(rule.Agents) > 0 {
			who = strings.Join(rule.Agents, ", ")
		}
		if rule.Tunnel {
			out = append(out, r.finding("write a brokered rule (methods and paths) for the host instead, or accept the tunnel as a way out (docs/security.md)",
				"lets %s open a blind tunnel to %s:%d: the gateway cannot see inside it, so any method, path or protocol goes", who, rule.Host, rule.Port))
		}
		if rule.Roots != "" {
			out = append(out, r.finding("trust extra roots only for a host whose CA you run (a private registry, a test fixture)",
				"verifies %s:%d against roots besides the system's (the rule's roots)", rule.Host, rule.Port))
		}
	}
	return out
}
