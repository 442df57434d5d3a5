package policy_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The model gateway on aws: the captured stack with a gateway passes the
// whole pack, and the gateway policies fire on it once broken.

// gatewayKey is a made-up upstream key (the shape of one, not a credential).
const gatewayKey = "sk-ant-test-only-KEY-4f1c9e"

var (
	gatewayMu       sync.Mutex
	gatewayCaptures = map[string][]capture.Resource{}
)

// awsGatewayCapture is the aws stack with a gateway (the anthropic
// upstream, its key a secret), agents agents and nodes bus nodes, with the
// mocks' id and arn as a stack policy sees them (cached; a clone each time).
func awsGatewayCapture(t testing.TB, agents, nodes int) []capture.Resource {
	t.Helper()
	key := fmt.Sprint(agents, nodes)
	gatewayMu.Lock()
	defer gatewayMu.Unlock()
	if rs, ok := gatewayCaptures[key]; ok {
		return clone(rs)
	}
	s, err := capture.RunStack("aws", capture.Config{
		"flock:agentCount":      fmt.Sprint(agents),
		"flock:bus":             fmt.Sprintf(`{"replicas": %d}`, nodes),
		"flock:gateway":         `{"upstreams": {"anthropic": {}}}`,
		"flock:anthropicApiKey": gatewayKey,
	}, "flock:anthropicApiKey")
	if err != nil {
		t.Fatalf("aws stack with a gateway: %v", err)
	}
	rs := withProviderIDs(s.Resources)
	gatewayCaptures[key] = rs
	return clone(rs)
}

// TestAWSGatewayStackPasses: the aws stack with a gateway breaks no policy,
// in preview (unknown values) either.
func TestAWSGatewayStackPasses(t *testing.T) {
	for _, c := range []struct{ agents, nodes int }{{3, 1}, {3, 3}, {50, 3}} {
		t.Run(fmt.Sprintf("%d agents, %d bus nodes", c.agents, c.nodes), func(t *testing.T) {
			seen := assertClean(t, "aws", awsGatewayCapture(t, c.agents, c.nodes))
			if got := seen["ecs-task-non-root-user"]; got < c.agents+c.nodes+2 {
				t.Errorf("task definition policies inspected %d task definitions, want the agents, the bus nodes, the operator and the gateway", got)
			}
			if vs := check("aws", previewOfNewStack(awsGatewayCapture(t, c.agents, c.nodes))); len(vs) > 0 {
				t.Errorf("unknown values make the pack report:%s", messages(vs))
			}
		})
	}
}

// The aws stack with brokered egress rules (a credential the gateway
// injects, a port besides 443, plain HTTP) breaks no policy, in preview
// either: the proxy URLs carrying the agents' tokens come from secrets.
func TestAWSEgressStackPasses(t *testing.T) {
	s, err := capture.RunStack("aws", capture.Config{
		"flock:gateway": `{"upstreams": {"anthropic": {}}, "egress": [
			{"preset": "github", "agents": ["agent-1"], "credential": {"basicUser": "x-access-token", "secret": "githubToken"}},
			{"host": "registry.example.com", "port": 8443}, {"host": "mirror.example.org", "plainHttp": true}]}`,
		"flock:anthropicApiKey": gatewayKey, "flock:githubToken": "ghp_" + strings.Repeat("a", 36),
	}, "flock:anthropicApiKey", "flock:githubToken")
	if err != nil {
		t.Fatal(err)
	}
	rs := withProviderIDs(s.Resources)
	assertClean(t, "aws", rs)
	if vs := check("aws", previewOfNewStack(rs)); len(vs) > 0 {
		t.Errorf("unknown values make the pack report:%s", messages(vs))
	}
}

// Without a gateway, stack-aws-agents-no-route-out does not judge the
// stack: flock:aws.egress "nat" routes every task through the NAT gateway
// on purpose (and is refused with a gateway).
func TestAWSNoRouteOutOnlyWithAGateway(t *testing.T) {
	rs := awsCaptureWith(t, capture.Config{"flock:agentCount": "3", "flock:aws": `{"egress": "nat"}`})
	for _, v := range check("aws", rs) {
		if v.Policy == "stack-aws-agents-no-route-out" {
			t.Errorf("a stack without a gateway judged: %s", v.Message())
		}
	}
}

// gatewayWith breaks the captured gateway stack.
func gatewayWith(f func(t testing.TB, rs []capture.Resource) []capture.Resource) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource { return f(t, awsGatewayCapture(t, 3, 3)) }
}

func gatewayTask(name string, f func(c map[string]any)) func(t testing.TB) []capture.Resource {
	return gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
		return editContainerDefs(t, rs, name, func(defs []map[string]any) { f(defs[0]) })
	})
}

func addEnv(c map[string]any, name, value string) {
	c["environment"] = append(list(c["environment"]), map[string]any{"name": name, "value": value})
}

func addSecret(t testing.TB, rs []capture.Resource, task, env, secret string) []capture.Resource {
	arn := rs[find(t, rs, awsrules.TypeSecret, secret)].Inputs["arn"].StringValue()
	return editContainerDefs(t, rs, task, func(defs []map[string]any) {
		defs[0]["secrets"] = append(list(defs[0]["secrets"]), map[string]any{"name": env, "valueFrom": arn})
	})
}

func gatewayBreakCases() []breakCase {
	const noRoute, noKey = "stack-aws-agents-no-route-out", "ecs-task-no-gateway-key-in-agent"
	return []breakCase{
		{policy: noRoute, resource: "flock-sg-agents-to-internet", stack: "aws", want: `gives the agents' security group "flock-agents-sg" egress (ports 443-443) to 0.0.0.0/0`,
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return append(rs, capture.Resource{Type: awsrules.TypeSecurityGroupRule, Name: "flock-sg-agents-to-internet", Custom: true,
					Inputs: resource.NewPropertyMapFromMap(map[string]any{
						"type": "egress", "securityGroupId": capture.MockID("flock-agents-sg"), "cidrBlocks": []any{"0.0.0.0/0"},
						"protocol": "tcp", "fromPort": 443, "toPort": 443,
					})})
			})},
		{policy: noRoute, resource: "flock-agents-sg", stack: "aws", want: "is an agents' security group with egress (ports 0-65535) to ::/0",
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return edit(t, rs, awsrules.TypeSecurityGroup, "flock-agents-sg", func(in map[string]any) {
					in["egress"] = []any{map[string]any{"protocol": "tcp", "fromPort": 0, "toPort": 65535, "ipv6CidrBlocks": []any{"::/0"}}}
				})
			})},
		{policy: noRoute, resource: "flock-agent-2", stack: "aws", want: `runs agent tasks in the subnet "flock-egress-1", whose route table "flock-egress-rt" routes 0.0.0.0/0 to the NAT gateway "flock-nat"`,
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return edit(t, rs, awsrules.TypeService, "flock-agent-2", func(in map[string]any) {
					obj(in["networkConfiguration"])["subnets"] = []any{capture.MockID("flock-egress-1"), capture.MockID("flock-private-2")}
				})
			})},
		{policy: noRoute, resource: "flock-agent-1", stack: "aws", want: `whose route table "flock-private-rt" routes 0.0.0.0/0 to the internet gateway "flock-igw"`,
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return append(rs, capture.Resource{Type: awsrules.TypeRoute, Name: "flock-private-default", Custom: true,
					Inputs: resource.NewPropertyMapFromMap(map[string]any{
						"routeTableId": capture.MockID("flock-private-rt"), "destinationCidrBlock": "0.0.0.0/0", "gatewayId": capture.MockID("flock-igw"),
					})})
			})},
		{policy: noKey, resource: "flock-agent-1-task", stack: "aws", want: `agent agent-1's container "agent" reads the gateway's secret "flock-gateway-key-anthropic" as MODEL_KEY`,
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return addSecret(t, rs, "flock-agent-1-task", "MODEL_KEY", "flock-gateway-key-anthropic")
			})},
		{policy: noKey, resource: "flock-agent-3-task", stack: "aws", want: `reads the gateway's secret "flock-gateway-nkey" as NATS_EXTRA`,
			build: gatewayWith(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return addSecret(t, rs, "flock-agent-3-task", "NATS_EXTRA", "flock-gateway-nkey")
			})},
		{policy: noKey, resource: "flock-agent-2-task", stack: "aws", want: "has the variable ANTHROPIC_API_KEY, named like an API key, secret or password",
			// A path is no value ecs-task-no-secret-env refuses; an agent still gets no such variable.
			build: gatewayTask("flock-agent-2-task", func(c map[string]any) { addEnv(c, "ANTHROPIC_API_KEY", "/run/secrets/anthropic") })},
		{policy: noKey, resource: "flock-agent-2-task", stack: "aws", want: "has what looks like a model provider's key in its environment (variable MODEL_AUTH)",
			build: gatewayTask("flock-agent-2-task", func(c map[string]any) { addEnv(c, "MODEL_AUTH", gatewayKey) })},
		{policy: noKey, resource: "flock-agent-3-task", stack: "aws", want: "has what looks like a model provider's key in its environment (variable UPSTREAM)",
			build: gatewayTask("flock-agent-3-task", func(c map[string]any) {
				addEnv(c, "UPSTREAM", "sk-proj-0123456789abcdefghijABCDEFGHIJ")
			})},
	}
}

// The gateway's own task reads its keys, and each agent its own token: no
// violation. A secret of an agent's own (tagged with its ID) is not the
// gateway's, even when its name looks like an upstream key's.
func TestGatewayKeyRuleTargetsAgentsOnly(t *testing.T) {
	rs := awsGatewayCapture(t, 3, 1)
	for _, v := range check("aws", rs) {
		t.Errorf("clean stack: %s", v.Message())
	}
	// An agent whose secrets happen to contain gateway-key- in their name
	// (its own, tagged with its ID) is not reading the gateway's.
	r := rs[find(t, rs, awsrules.TypeSecret, "flock-agent-1-gateway-token")]
	r.Name = "flock-gateway-key-x-nkey"
	r.Inputs = r.Inputs.Copy()
	rs = append(rs, r)
	rs = addSecret(t, rs, "flock-agent-1-task", "OWN", "flock-gateway-key-x-nkey")
	for _, v := range check("aws", rs) {
		if v.Policy == "ecs-task-no-gateway-key-in-agent" {
			t.Errorf("an agent's own secret taken for the gateway's: %s", v.Message())
		}
	}
}

// The message never repeats the value it found.
func TestGatewayKeyRuleNeverEchoes(t *testing.T) {
	rs := gatewayTask("flock-agent-1-task", func(c map[string]any) { addEnv(c, "MODEL_AUTH", gatewayKey) })(t)
	for _, v := range check("aws", rs) {
		if strings.Contains(v.Message(), gatewayKey) {
			t.Errorf("the message repeats the key: %s", v.Message())
		}
	}
}
