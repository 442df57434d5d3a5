package awsflock

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// The names the component gives AWS resources, in one place: the declarer
// names its resources with these functions, and Config.Validate checks
// every name they make from the configuration against AWS's rules
// (awsrules) before anything is declared.
//
// Roles, role policies, secrets, security groups, the repository and the
// cluster are auto-named: the provider names each after its logical name
// plus "-" and 7 random characters. That stays. Explicit short role names
// (or a namePrefix) would fit any flock, but renaming replaces every role,
// and with them every task definition and service of a deployed flock; the
// one way to overflow (a role name is at most 64) is a long flock name with
// a long agent ID (flock:name and the ID together over 45 characters), and
// the configuration is refused for it, naming the agent and the characters
// to drop, before anything is declared.

// resourceName is a child's logical name: the flock's name and parts, joined by "-".
func resourceName(flockName string, parts ...string) string {
	return strings.Join(append([]string{flockName}, parts...), "-")
}

// Scope prefixes the names AWS requires to be unique in an account and
// region (log groups, task definition families): the stack and the flock,
// in the characters a task definition family allows.
func Scope(stack, flockName string) string {
	return familySafe.ReplaceAllString(stack, "-") + "-" + flockName
}

var familySafe = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// TaskFamily is the task definition family of a task (key: an agent ID,
// bus, bus-<n>, services, gateway, operator).
func TaskFamily(stack, flockName, key string) string {
	return Scope(stack, flockName) + "-" + key
}

// TaskLogGroupName is the log group of the bus nodes, the services, the
// gateway and the operator task (LogGroupName is an agent's).
func TaskLogGroupName(stack, flockName, key string) string {
	return "/ai-flock/" + stack + "/" + flockName + "/" + key
}

// LogGroupName is the CloudWatch log group of an agent.
func LogGroupName(stack, flockName, id string) string {
	return "/ai-flock/" + stack + "/" + flockName + "/agents/" + id
}

// roleDescriptions are a task's execution and task role descriptions.
func roleDescriptions(flockName, key string, mounts bool) (exec, task string) {
	what := "mount its own EFS access points"
	if !mounts {
		what = "no AWS access (it mounts no EFS)"
	}
	return "AI Flock " + flockName + " " + key + ": pull its image, write its logs, read its own secrets",
		"AI Flock " + flockName + " " + key + ": " + what
}

// securityGroupKeys name the flock's security groups (<flock>-<key>-sg).
var securityGroupKeys = []string{"agents", "bus", "efs", "operator", "endpoints", "gateway", "services"}

// derived is one value the component would send AWS, made from the
// configuration.
type derived struct {
	key    string // the configuration key it comes from
	source string // that key's value, as users wrote it
	rule   awsrules.Rule
	value  string
	auto   bool // the provider completes it (logical name + 8 characters)
}

// nameErrors checks every value the component would make from the
// configuration against AWS's rules, and returns each violation as a
// *flock.Error naming its key, the value AWS would see and the rule.
//
// nsSet tells whether the namespace is flock:aws.namespace (else it is
// derived from flock:name).
func nameErrors(stack string, a Args, nsSet bool) []error {
	var errs []error
	for _, d := range derivedNames(stack, a, nsSet) {
		v := d.value
		if d.auto {
			v = awsrules.AutoName(v)
		}
		err := d.rule.Check(v)
		var viol *awsrules.Violation
		if !errors.As(err, &viol) {
			continue
		}
		auto := ""
		if d.auto {
			auto = fmt.Sprintf(" (auto-named: the provider adds \"-\" and %d random characters)", awsrules.AutoNameRandom-1)
		}
		errs = append(errs, &flock.Error{Key: d.key, Rule: fmt.Sprintf("%q would make the %s %q%s, which %s; %s (%s)",
			d.source, viol.What, viol.Value, auto, viol.Problem, viol.Limit, viol.Ref)})
	}
	return errs
}

// derivedNames lists what the component names after the configuration: per
// task its family, log group, roles, role policies, service and secrets;
// per agent its access point roots and tags; the flock's security groups,
// repository, cluster, namespace and Cloud Map services.
func derivedNames(stack string, a Args, nsSet bool) []derived {
	m := a.Model
	name := m.Name
	var out []derived
	add := func(key, source string, rule awsrules.Rule, value string, auto bool) {
		out = append(out, derived{key: key, source: source, rule: rule, value: value, auto: auto})
	}
	flockKey := func(r awsrules.Rule, v string, auto bool) { add("flock:name", name, r, v, auto) }

	// Tasks: the operator, each bus node, the services, the gateway, each agent.
	type taskName struct {
		key, configKey, source, role string
		service, mounts              bool
		secrets                      []string
	}
	var tasks []taskName
	tasks = append(tasks, taskName{key: "operator", configKey: "flock:name", source: name, role: "operator", mounts: true, secrets: []string{"operator-nkey"}})
	for _, n := range m.Bus.BusNodes() {
		key := busNodeKey(m, n)
		tasks = append(tasks, taskName{key: key, configKey: "flock:name", source: name, role: "bus", service: true, mounts: !m.Bus.Clustered(),
			// Config and topology go in numbered parts; part 1 stands for all (they differ in a digit or two).
			secrets: []string{key + "-config-1", key + "-topology-1"}})
	}
	tasks = append(tasks, taskName{key: ServicesKey, configKey: "flock:name", source: name, role: RoleServices, service: true, secrets: []string{ServicesKey + "-nkey"}})
	if m.Gateway.Enabled() {
		secrets := []string{"gateway-nkey", "gateway-config-1"}
		for _, up := range m.Gateway.Upstreams {
			secrets = append(secrets, "gateway-key-"+up.Name)
		}
		tasks = append(tasks, taskName{key: "gateway", configKey: "flock:name", source: name, role: protocol.RoleGateway, service: true, secrets: secrets})
	}
	for _, ag := range m.Agents {
		secrets := []string{ag.ID + "-nkey"}
		if m.Gateway.Enabled() {
			secrets = append(secrets, ag.ID+"-gateway-token")
		}
		key := ag.IDKey
		if key == "" {
			key = "flock:agents"
		}
		tasks = append(tasks, taskName{key: ag.ID, configKey: key, source: ag.ID, role: "agent", service: true, mounts: true, secrets: secrets})
		add(key, ag.ID, awsrules.EFSAccessPointPath, EFSAgentDir(ag.ID), false)
		add(key, ag.ID, awsrules.EFSAccessPointPath, EFSLogDir(ag.ID), false)
		add(key, ag.ID, awsrules.TagValue, ag.ID, false)
	}
	for _, t := range tasks {
		logGroup := TaskLogGroupName(stack, name, t.key)
		if t.role == "agent" {
			logGroup = LogGroupName(stack, name, t.key)
		}
		add(t.configKey, t.source, awsrules.ECSTaskFamily, TaskFamily(stack, name, t.key), false)
		add(t.configKey, t.source, awsrules.LogGroupName, logGroup, false)
		add(t.configKey, t.source, awsrules.ECSContainerName, t.role, false)
		for _, kind := range []string{"exec-role", "task-role"} {
			add(t.configKey, t.source, awsrules.IAMRoleName, resourceName(name, t.key, kind), true)
		}
		for _, kind := range []string{"exec-policy", "task-policy"} {
			add(t.configKey, t.source, awsrules.IAMRolePolicyName, resourceName(name, t.key, kind), true)
		}
		exec, task := roleDescriptions(name, t.key, t.mounts)
		add(t.configKey, t.source, awsrules.IAMRoleDescription, exec, false)
		add(t.configKey, t.source, awsrules.IAMRoleDescription, task, false)
		if t.service {
			add(t.configKey, t.source, awsrules.ECSServiceName, resourceName(name, t.key), false)
		}
		for _, s := range t.secrets {
			add(t.configKey, t.source, awsrules.SecretName, resourceName(name, s), true)
		}
	}

	// The flock's own: security groups, repository, cluster, tags.
	for _, sg := range securityGroupKeys {
		flockKey(awsrules.SecurityGroupName, resourceName(name, sg, "sg"), true)
	}
	flockKey(awsrules.ECRRepositoryName, resourceName(name, "images"), true)
	flockKey(awsrules.ECSClusterName, resourceName(name, "cluster"), true)
	flockKey(awsrules.TagValue, name, false)
	for _, k := range []string{protocol.LabelFlock, protocol.LabelRole, protocol.LabelAgent} {
		flockKey(awsrules.TagKey, k, false)
	}

	// Cloud Map: the namespace (flock:aws.namespace, or derived from
	// flock:name) and a service per bus node and the gateway.
	nsKey, nsSource := Key+".namespace", a.Namespace
	if !nsSet {
		nsKey, nsSource = "flock:name", name
	}
	add(nsKey, nsSource, awsrules.CloudMapNamespaceName, a.Namespace, false)
	for _, n := range m.Bus.BusNodes() {
		flockKey(awsrules.CloudMapServiceName, busNodeKey(m, n), false)
	}
	return out
}

// busNodeKey names node n's resources: "bus" for a single bus (the names
// it has always had), "bus-<n>" for the nodes of a cluster.
func busNodeKey(m flock.Model, n int) string {
	if !m.Bus.Clustered() {
		return "bus"
	}
	return "bus-" + strconv.Itoa(n)
}
