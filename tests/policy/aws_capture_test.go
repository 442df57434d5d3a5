package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack as infra/awsflock declares it, captured under the mock
// engine (capture.RunAWS). Besides the inputs, the engine hands stack
// policies each resource's state: for aws resources that includes the id and
// arn the provider assigned, which the policies use to link a task to its
// access points and a service to its security groups. awsCapture adds the
// mocks' id and arn (capture.MockID, capture.MockARN) the same way, so those
// links are checked too.
func awsCapture(t testing.TB, n int) []capture.Resource {
	t.Helper()
	return awsCaptureWith(t, capture.Config{"flock:agentCount": fmt.Sprint(n)})
}

// awsCaptureWith captures the aws stack with the given config overrides.
func awsCaptureWith(t testing.TB, cfg capture.Config) []capture.Resource {
	t.Helper()
	s, err := capture.RunAWS(cfg)
	if err != nil {
		t.Fatalf("aws stack %v: %v", cfg, err)
	}
	return withProviderIDs(s.Resources)
}

// withProviderIDs is a copy of the captured resources with the id and arn
// outputs the provider would give every aws resource, as the policies read them.
func withProviderIDs(captured []capture.Resource) []capture.Resource {
	rs := clone(captured)
	for i, r := range rs {
		if !strings.HasPrefix(r.Type, "aws:") {
			continue
		}
		if _, ok := r.Inputs["id"]; !ok {
			rs[i].Inputs["id"] = resource.NewStringProperty(capture.MockID(r.Name))
		}
		if _, ok := r.Inputs["arn"]; !ok {
			rs[i].Inputs["arn"] = resource.NewStringProperty(capture.MockARN(r.Type, r.Name, r.Inputs))
		}
	}
	return rs
}

// TestAWSStackPasses: the aws stack as declared (3 agents, and 50) breaks no policy.
func TestAWSStackPasses(t *testing.T) {
	for _, n := range []int{3, 50} {
		t.Run(fmt.Sprintf("%d agents", n), func(t *testing.T) {
			seen := assertClean(t, "aws", awsCapture(t, n))
			if got := seen["ecs-task-non-root-user"]; got < n+3 {
				t.Errorf("task definition policies inspected %d task definitions, want at least %d (the agents and the three bus nodes)", got, n+3)
			}
		})
	}
}

// TestAWSStackPoliciesSeeTheAgents: the stack policies recognise the aws
// stack's agents (its tags, access point roots and IDs), so its clean result
// is not vacuous: breaking it makes them fire.
func TestAWSStackPoliciesSeeTheAgents(t *testing.T) {
	for _, c := range []struct {
		policy, want string
		build        func(t testing.TB) []capture.Resource
	}{
		{"stack-nothing-private-shared", `EFS volume "peer" reaches /agents/agent-1`, func(t testing.TB) []capture.Resource {
			return edit(t, awsCapture(t, 3), awsrules.TypeTaskDefinition, "flock-agent-2-task", func(in map[string]any) {
				in["volumes"] = append(list(in["volumes"]), map[string]any{"name": "peer", "efsVolumeConfiguration": map[string]any{
					"fileSystemId": "flock-efs-id", "transitEncryption": "ENABLED",
					"authorizationConfig": map[string]any{"accessPointId": capture.MockID("flock-agent-1-dir-ap"), "iam": "ENABLED"},
				}})
			})
		}},
		{"stack-agent-own-directory", "agent agent-2 has no access point of its own", func(t testing.TB) []capture.Resource {
			return remove(t, awsCapture(t, 3), awsrules.TypeAccessPoint, "flock-agent-2-dir-ap")
		}},
		{"stack-agent-own-network", `adds ingress to the agents' security group "flock-agents-sg"`, func(t testing.TB) []capture.Resource {
			rs := awsCapture(t, 3)
			return append(rs, capture.Resource{Type: awsrules.TypeSecurityGroupRule, Name: "flock-agents-self", Custom: true,
				Inputs: resource.NewPropertyMapFromMap(map[string]any{
					"type": "ingress", "securityGroupId": capture.MockID("flock-agents-sg"), "self": true,
					"protocol": "-1", "fromPort": 0, "toPort": 0,
				})})
		}},
		{"stack-unique-agent-uid", "forces the POSIX UID 20001 on agent agent-2's files", func(t testing.TB) []capture.Resource {
			return edit(t, awsCapture(t, 3), awsrules.TypeAccessPoint, "flock-agent-2-dir-ap", func(in map[string]any) {
				in["posixUser"] = map[string]any{"uid": 20001, "gid": 20001}
			})
		}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			vs := check("aws", c.build(t))
			for _, v := range vs {
				if v.Policy == c.policy && strings.Contains(v.Message(), c.want) {
					return
				}
			}
			t.Errorf("no %s violation saying %q:%s", c.policy, c.want, messages(vs))
		})
	}
}
