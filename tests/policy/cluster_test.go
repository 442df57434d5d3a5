package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// A clustered bus: its nodes are one bus. They share the bus's UID (its
// slot), which stack-unique-agent-uid allows them and nobody else; their
// route port is open to the bus's own group only.

// awsCaptureNodes is the captured aws stack with the given bus nodes.
func awsCaptureNodes(t testing.TB, agents, nodes int) []capture.Resource {
	t.Helper()
	rs := awsCaptureWith(t, capture.Config{"flock:agentCount": fmt.Sprint(agents), "flock:bus": fmt.Sprintf(`{"replicas": %d}`, nodes)})
	tds := 0
	for _, r := range rs {
		if r.Type == awsrules.TypeTaskDefinition && strings.HasPrefix(r.Name, "flock-bus") {
			tds++
		}
	}
	if tds != nodes {
		t.Fatalf("%d bus task definitions, want %d", tds, nodes)
	}
	return rs
}

// Both shapes of the aws bus break no policy.
func TestAWSClusterStackPasses(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d bus nodes", nodes), func(t *testing.T) {
			assertClean(t, "aws", awsCaptureNodes(t, 3, nodes))
		})
	}
}

// The bus nodes share a UID, yet two agents still may not: neither two
// agents' tasks, nor an agent and a bus node.
func TestAWSClusterUIDs(t *testing.T) {
	for _, c := range []struct {
		task, user, want string
	}{
		{"flock-agent-2-task", "20001:20001", `"flock-agent-2-task": runs as UID 20001 like the task definition "flock-agent-1-task"`},
		{"flock-agent-2-task", "20000:20000", `"flock-bus-1-task": runs as UID 20000 like the task definition "flock-agent-2-task"`},
		{"flock-operator-task", "20000:20000", `runs as UID 20000 like the task definition`},
	} {
		t.Run(c.task+" as "+c.user, func(t *testing.T) {
			rs := editContainerDefs(t, awsCaptureNodes(t, 3, 3), c.task, func(defs []map[string]any) { defs[0]["user"] = c.user })
			vs := check("aws", rs)
			var hit bool
			for _, v := range vs {
				hit = hit || (v.Policy == "stack-unique-agent-uid" && strings.Contains(v.Message(), c.want))
			}
			if !hit {
				t.Errorf("no stack-unique-agent-uid violation saying %q:%s", c.want, messages(vs))
			}
		})
	}
}

// The captured cluster's route rule is what the policy reads: pointed at
// the agents' group, it fires.
func TestAWSClusterRoutesSeen(t *testing.T) {
	rs := edit(t, awsCaptureNodes(t, 3, 3), awsrules.TypeSecurityGroupRule, "flock-sg-bus-routes-from-bus", func(in map[string]any) {
		in["sourceSecurityGroupId"] = capture.MockID("flock-agents-sg")
	})
	vs := check("aws", rs)
	if got := policyNames(vs); len(got) != 1 || got[0] != "stack-bus-routes-self-only" ||
		!strings.Contains(messages(vs), `from the security group "flock-agents-sg"`) {
		t.Errorf("route port opened to the agents: want stack-bus-routes-self-only alone, got:%s", messages(vs))
	}
}

// docker: bus containers (the nodes of a dev-stack cluster) share the bus's
// UID; an agent container on it still fails.
func TestDockerBusContainersShareTheBusUID(t *testing.T) {
	rs := dev(t, 3)
	node := rs[find(t, rs, rules.TypeContainer, bus)]
	node.Name = bus + "-2"
	node.Inputs = node.Inputs.Copy() // same labels and user as the bus
	withNode := append(clone(rs), node)
	for _, v := range check("dev", withNode) {
		if v.Policy == "stack-unique-agent-uid" {
			t.Errorf("two bus containers on the bus's UID refused: %s", v.Message())
		}
	}
	user := node.Inputs["user"].StringValue()
	agentOnBusUID := edit(t, clone(rs), rules.TypeContainer, "flock-agent-2", func(in map[string]any) { in["user"] = user })
	var hit bool
	for _, v := range check("dev", agentOnBusUID) {
		hit = hit || v.Policy == "stack-unique-agent-uid"
	}
	if !hit {
		t.Errorf("an agent on the bus's UID %s passed", user)
	}
}
