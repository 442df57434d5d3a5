package rules

import (
	"errors"
	"fmt"
	"sort"

	"github.com/ai-flock/ai-flock/infra/awsrules"
)

// What AWS accepts in the inputs the aws stack sets (infra/awsrules, the
// one table the component's config validation uses too). A value AWS
// refuses fails only at deploy, after a clean preview, often half way
// through: these rules refuse it at preview.

// tableFinding checks one known string against a table rule: nil when AWS
// accepts it (or it is not known yet), else a finding that quotes the value,
// the rule and its reference. where says whose value it is ("", or
// `container "agent": `); note how the name was made.
func (r Resource) tableFinding(rule awsrules.Rule, v, where, note, fix string) []Finding {
	var viol *awsrules.Violation
	if !errors.As(rule.Check(v), &viol) {
		return nil
	}
	return []Finding{r.finding(fix, "%sits %s %q%s %s; %s (%s)", where, viol.What, viol.Value, note, viol.Problem, viol.Limit, viol.Ref)}
}

// text checks a string input (skipped when absent or unknown).
func (r Resource) text(rule awsrules.Rule, fix string, keys ...string) []Finding {
	v := r.get(keys...)
	s, ok := v.(string)
	if !ok {
		return nil
	}
	return r.tableFinding(rule, s, "", "", fix)
}

// physicalName checks the name AWS will get: the name input; without one,
// a namePrefix (the provider appends 26 characters); without either, the
// logical name plus the provider's "-" and 7 random characters. The engine
// hands policies the inputs after the provider's check, which fills in an
// auto-name; a capture under the mocks has none, so the logical name is read.
func (r Resource) physicalName(rule awsrules.Rule, fix string) []Finding {
	name, prefix := r.get("name"), r.get("namePrefix")
	switch {
	case isUnknown(name) || isUnknown(prefix):
		return nil
	case str(name) != "":
		return r.tableFinding(rule, str(name), "", "", fix)
	case str(prefix) != "":
		p := awsrules.PrefixOf(rule)
		if rule.What == awsrules.IAMRoleName.What {
			p = awsrules.IAMRoleNamePrefix
		}
		return r.tableFinding(p, str(prefix), "", " (the provider appends 26 characters)", fix)
	}
	return r.tableFinding(rule, awsrules.AutoName(r.Name), "",
		fmt.Sprintf(" (auto-named: the logical name, \"-\" and %d random characters)", awsrules.AutoNameRandom-1), fix)
}

const fixName = "shorten the name or keep to the characters AWS allows (an auto-named resource is named after its logical name: the flock's name, the agent's ID and a part name; shorten flock:name or the agent's ID)"

func awsSecurityGroupText(r Resource) []Finding {
	const fix = "write descriptions in the characters EC2 allows: letters, digits, spaces and ._-:/()#,@[]+=&;{}!$* (no apostrophes or quotes), at most 255"
	switch r.Type {
	case awsrules.TypeSecurityGroup:
		out := r.physicalName(awsrules.SecurityGroupName, fixName)
		out = append(out, r.text(awsrules.SecurityGroupDescription, fix, "description")...)
		for _, dir := range []string{"ingress", "egress"} {
			for _, rule := range list(r.get(dir)) {
				if d, ok := obj(rule)["description"].(string); ok {
					out = append(out, r.tableFinding(awsrules.SecurityGroupRuleDescription, d, "an inline "+dir+" rule: ", "", fix)...)
				}
			}
		}
		return out
	default: // the rule resources
		return r.text(awsrules.SecurityGroupRuleDescription, fix, "description")
	}
}

func awsIAMNames(r Resource) []Finding {
	switch r.Type {
	case awsrules.TypeRole:
		out := r.physicalName(awsrules.IAMRoleName, fixName)
		return append(out, r.text(awsrules.IAMRoleDescription, "keep the description to 1000 printable Latin-1 characters (tab, newline and carriage return allowed)", "description")...)
	default:
		return r.physicalName(awsrules.IAMRolePolicyName, fixName)
	}
}

func awsECSNames(r Resource) []Finding {
	switch r.Type {
	case awsrules.TypeTaskDefinition:
		out := r.text(awsrules.ECSTaskFamily, fixName, "family")
		return append(out, eachContainer(r, "name containers with letters, digits, _ and - only (at most 255)", func(name string, c map[string]any) []Finding {
			return r.tableFinding(awsrules.ECSContainerName, name, "", "", "name containers with letters, digits, _ and - only (at most 255)")
		})...)
	case awsrules.TypeService:
		return r.physicalName(awsrules.ECSServiceName, fixName)
	default:
		return r.physicalName(awsrules.ECSClusterName, fixName)
	}
}

func awsECSHealthCheck(r Resource) []Finding {
	const fix = "keep the health check's interval 5-300 s, timeout 2-60 s, retries 1-10 and startPeriod 0-300 s"
	return eachContainer(r, fix, func(name string, c map[string]any) []Finding {
		hc := obj(c["healthCheck"])
		var out []Finding
		for _, f := range []struct {
			key string
			rng awsrules.Range
		}{
			{"interval", awsrules.HealthCheckInterval}, {"timeout", awsrules.HealthCheckTimeout},
			{"retries", awsrules.HealthCheckRetries}, {"startPeriod", awsrules.HealthCheckStartPeriod},
		} {
			v, ok := number(hc[f.key])
			if !ok {
				continue // unset: ECS's default, which is in range
			}
			if n := int(v); float64(n) != v || f.rng.Check(n) != nil {
				out = append(out, r.finding(fix, "container %q: healthCheck.%s is %v; %s (%s)", name, f.key, v, f.rng.Limit(), f.rng.Ref))
			}
		}
		return out
	})
}

func awsLogGroupName(r Resource) []Finding {
	return r.physicalName(awsrules.LogGroupName, "name log groups with letters, digits and . - _ / # only (at most 512)")
}

func awsCloudMapNames(r Resource) []Finding {
	if r.Type == awsrules.TypeNamespace {
		return r.text(awsrules.CloudMapNamespaceName, "name the namespace as a DNS name (flock:aws.namespace): labels of letters, digits and - up to 63 characters, at most 253 in all", "name")
	}
	return r.text(awsrules.CloudMapServiceName, "name the service as one DNS label: letters, digits and -, at most 63", "name")
}

func awsECRRepositoryName(r Resource) []Finding {
	return r.physicalName(awsrules.ECRRepositoryName, fixName+"; ECR takes lower-case names only")
}

func awsEFSAccessPointPath(r Resource) []Finding {
	return r.text(awsrules.EFSAccessPointPath, "root access points at an absolute path of at most 100 characters and four levels", "rootDirectory", "path")
}

func awsSecretName(r Resource) []Finding {
	return r.physicalName(awsrules.SecretName, fixName)
}

func awsTagLimits(r Resource) []Finding {
	const fix = "tag with keys of at most 128 and values of at most 256 letters, digits, spaces and _ . : / = + - @, none starting with aws:"
	tags := obj(r.get("tags"))
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Finding
	for _, k := range keys {
		out = append(out, r.tableFinding(awsrules.TagKey, k, "", "", fix)...)
		if v, ok := tags[k].(string); ok {
			out = append(out, r.tableFinding(awsrules.TagValue, v, fmt.Sprintf("tag %q: ", k), "", fix)...)
		}
	}
	return out
}
