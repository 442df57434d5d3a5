package policy_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The flock's services on aws (stack-aws-services-no-ingress), on the aws
// fixture: awsWithServices adds them as infra/awsflock declares them (their
// own group, no ingress, egress to the bus; the bus admits them on 4222;
// their task from the bus image as their own UID; a service in their group),
// then lets a case break one thing.

const servicesUID = flock.DefaultUIDBase + 253

func awsWithServices(f func(t testing.TB, rs []capture.Resource) []capture.Resource) func(testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource {
		rs := awsStack(3)
		parent := string(resource.NewURN("aws", "ai-flock", "", "flock:aws:Flock", "flock"))
		add := func(typ, name string, in map[string]any) {
			rs = append(rs, capture.Resource{Type: typ, Name: name, Custom: true, Parent: parent, Inputs: resource.NewPropertyMapFromMap(in)})
		}
		tags := map[string]any{protocol.LabelFlock: "flock", protocol.LabelRole: protocol.RoleServices}
		add(awsrules.TypeSecurityGroup, "flock-services-sg", map[string]any{
			"id": "sg-services", "vpcId": "vpc-1", "description": "AI Flock services: no ingress",
			"egress": []any{map[string]any{"protocol": "tcp", "fromPort": 4222, "toPort": 4222, "securityGroups": []any{"sg-bus"}}},
			"tags":   tags,
		})
		add(awsrules.TypeSecurityGroupRule, "flock-sg-bus-from-services", map[string]any{
			"type": "ingress", "securityGroupId": "sg-bus", "sourceSecurityGroupId": "sg-services", "protocol": "tcp", "fromPort": 4222, "toPort": 4222,
		})
		defs, _ := json.Marshal([]map[string]any{{
			"name": protocol.RoleServices, "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/ai-flock/bus@sha256:0123", "essential": true,
			"user": fmt.Sprintf("%d:%d", servicesUID, servicesUID), "readonlyRootFilesystem": true,
			"entryPoint": []string{"/flock-services"}, "command": []string{"run"},
			"linuxParameters": map[string]any{"initProcessEnabled": true, "capabilities": map[string]any{"drop": []string{"ALL"}}},
			"environment":     []map[string]any{{"name": protocol.EnvServicesNATSURL, "value": "nats://bus.flock.local:4222"}},
			"secrets":         []map[string]any{{"name": protocol.EnvServicesNkey, "valueFrom": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ai-flock/flock/services"}},
			"logConfiguration": map[string]any{"logDriver": "awslogs", "options": map[string]any{
				"awslogs-group": "/ai-flock/flock", "awslogs-region": "eu-west-1", "awslogs-stream-prefix": protocol.RoleServices,
			}},
		}})
		arn := "arn:aws:ecs:eu-west-1:123456789012:task-definition/flock-services:1"
		add(awsrules.TypeTaskDefinition, "flock-services-task", map[string]any{
			"arn": arn, "family": "flock-services", "networkMode": "awsvpc", "requiresCompatibilities": []any{"FARGATE"},
			"cpu": "512", "memory": "1024", "containerDefinitions": string(defs), "tags": tags,
		})
		add(awsrules.TypeService, "flock-services-svc", map[string]any{
			"cluster": "flock-cluster", "taskDefinition": arn, "desiredCount": 1, "launchType": "FARGATE",
			"networkConfiguration": map[string]any{"assignPublicIp": false, "subnets": []any{"subnet-a", "subnet-b"}, "securityGroups": []any{"sg-services"}},
			"tags":                 tags,
		})
		return f(t, rs)
	}
}

func awsServicesBreakCases() []breakCase {
	return append(awsDNSBreakCases(), []breakCase{
		{policy: "stack-aws-services-no-ingress", resource: "flock-services-sg", stack: "aws", want: "is the flock services' security group with 1 ingress rules",
			build: awsWithServices(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return edit(t, rs, awsrules.TypeSecurityGroup, "flock-services-sg", func(in map[string]any) {
					in["ingress"] = []any{map[string]any{"protocol": "tcp", "fromPort": 8080, "toPort": 8080, "securityGroups": []any{"sg-agents"}}}
				})
			})},
		{policy: "stack-aws-services-no-ingress", resource: "flock-sg-services-from-agents", stack: "aws", want: `adds ingress to the flock services' security group "flock-services-sg"`,
			build: awsWithServices(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				r := rs[find(t, rs, awsrules.TypeSecurityGroupRule, "flock-sg-bus-from-services")]
				r.Name = "flock-sg-services-from-agents"
				r.Inputs = resource.NewPropertyMapFromMap(map[string]any{
					"type": "ingress", "securityGroupId": "sg-services", "sourceSecurityGroupId": "sg-agents", "protocol": "tcp", "fromPort": 4222, "toPort": 4222,
				})
				return append(rs, r)
			})},
		{policy: "stack-aws-services-no-ingress", resource: "flock-services-svc", stack: "aws", want: "runs the flock's services without a security group of their own",
			build: awsWithServices(func(t testing.TB, rs []capture.Resource) []capture.Resource {
				return edit(t, rs, awsrules.TypeService, "flock-services-svc", func(in map[string]any) {
					obj(in["networkConfiguration"])["securityGroups"] = []any{}
				})
			})},
	}...)
}

// The fixture with the services, as declared, breaks no policy: the rule
// judges their group (and the rest of the pack their task) and finds
// nothing.
func TestAWSFixtureWithServicesPasses(t *testing.T) {
	rs := awsWithServices(func(t testing.TB, rs []capture.Resource) []capture.Resource { return rs })(t)
	seen := assertClean(t, "aws", rs)
	if got := seen["ecs-task-non-root-user"]; got != 5 {
		t.Errorf("task definition policies inspected %d, want 5 (the bus, 3 agents, the services)", got)
	}
}
