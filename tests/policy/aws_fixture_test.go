package policy_test

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// awsStack is a hand-made aws flock of n agents that keeps every invariant of
// the aws stack (README: the aws stack; infra/awsflock/README.md). The breaking fixtures
// of the aws policies are built on it: it is small, stable, and uses shapes
// the aws stack itself does not (inline security group ingress,
// vpc.SecurityGroupIngressRule), so every policy is exercised on both. The
// real aws stack is checked in aws_capture_test.go. Like the engine's view on
// `pulumi up`, it carries containerDefinitions as a JSON string and, for the
// resources others point at, the state properties id and arn.
//
// It follows the conventions the policies read, which infra/awsflock uses:
// task definitions, services, security groups and access points carry the
// tags ai-flock.flock, ai-flock.role and ai-flock.agent; an agent's task sets
// AGENT_ID; an agent's access points have the roots /agents/<id> and /logs/<id>.
func awsStack(n int) []capture.Resource {
	const (
		stack  = "aws"
		region = "eu-west-1"
		acct   = "123456789012"
		fsID   = "fs-0123456789abcdef0"
	)
	parent := string(resource.NewURN(stack, "ai-flock", "", "flock:aws:Flock", "flock"))
	var out []capture.Resource
	add := func(typ, name string, in map[string]any) {
		out = append(out, capture.Resource{Type: typ, Name: name, Custom: true, Parent: parent, Inputs: resource.NewPropertyMapFromMap(in)})
	}
	tags := func(role, agent string) map[string]any {
		t := map[string]any{protocol.LabelFlock: "flock", protocol.LabelRole: role}
		if agent != "" {
			t[protocol.LabelAgent] = agent
		}
		return t
	}
	efsVolume := func(name, ap string) map[string]any {
		return map[string]any{"name": name, "efsVolumeConfiguration": map[string]any{
			"fileSystemId":      fsID,
			"transitEncryption": "ENABLED",
			"authorizationConfig": map[string]any{
				"accessPointId": ap,
				"iam":           "ENABLED",
			},
		}}
	}
	accessPoint := func(name, id, root string, uid int, perms string) {
		add(awsrules.TypeAccessPoint, name, map[string]any{
			"id":           id,
			"fileSystemId": fsID,
			"posixUser":    map[string]any{"uid": uid, "gid": uid},
			"rootDirectory": map[string]any{"path": root, "creationInfo": map[string]any{
				"ownerUid": uid, "ownerGid": uid, "permissions": perms,
			}},
		})
	}
	container := func(name, user string, env []map[string]any, secrets []map[string]any, mounts []map[string]any) string {
		b, _ := json.Marshal([]map[string]any{{
			"name":                   name,
			"image":                  acct + ".dkr.ecr." + region + ".amazonaws.com/ai-flock/" + name + "@sha256:0123",
			"essential":              true,
			"user":                   user,
			"readonlyRootFilesystem": true,
			"privileged":             false,
			"linuxParameters": map[string]any{
				"initProcessEnabled": true,
				"capabilities":       map[string]any{"drop": []string{"ALL"}},
			},
			"environment": env,
			"secrets":     secrets,
			"mountPoints": mounts,
			"logConfiguration": map[string]any{"logDriver": "awslogs", "options": map[string]any{
				"awslogs-group": "/ai-flock/flock", "awslogs-region": region, "awslogs-stream-prefix": name,
			}},
		}})
		return string(b)
	}
	secretArn := func(user string) string {
		return "arn:aws:secretsmanager:" + region + ":" + acct + ":secret:ai-flock/flock/" + user
	}

	add(awsrules.TypeFileSystem, "flock-efs", map[string]any{"encrypted": true, "performanceMode": "generalPurpose", "tags": tags("bus", "")})
	add(awsrules.TypeLogGroup, "flock-logs", map[string]any{"name": "/ai-flock/flock", "retentionInDays": 30})

	// Security groups: agents admit nothing; the bus admits 4222 from agents; EFS admits 2049 from both.
	add(awsrules.TypeSecurityGroup, "flock-agents-sg", map[string]any{
		"id": "sg-agents", "vpcId": "vpc-1", "description": "AI Flock agents: no ingress",
		"egress": []any{
			map[string]any{"protocol": "tcp", "fromPort": 4222, "toPort": 4222, "securityGroups": []any{"sg-bus"}},
			map[string]any{"protocol": "tcp", "fromPort": 2049, "toPort": 2049, "securityGroups": []any{"sg-efs"}},
			map[string]any{"protocol": "tcp", "fromPort": 443, "toPort": 443, "prefixListIds": []any{"pl-s3"}, "securityGroups": []any{"sg-endpoints"}},
		},
		"tags": tags("agent", ""),
	})
	add(awsrules.TypeSecurityGroup, "flock-bus-sg", map[string]any{
		"id": "sg-bus", "vpcId": "vpc-1", "description": "AI Flock bus",
		"ingress": []any{map[string]any{"protocol": "tcp", "fromPort": 4222, "toPort": 4222, "securityGroups": []any{"sg-agents"}}},
		"tags":    tags("bus", ""),
	})
	add(awsrules.TypeSecurityGroup, "flock-efs-sg", map[string]any{"id": "sg-efs", "vpcId": "vpc-1", "description": "AI Flock EFS", "tags": tags("bus", "")})
	add(awsrules.TypeSGIngressRule, "flock-efs-from-agents", map[string]any{
		"securityGroupId": "sg-efs", "referencedSecurityGroupId": "sg-agents", "ipProtocol": "tcp", "fromPort": 2049, "toPort": 2049,
	})
	add(awsrules.TypeSecurityGroupRule, "flock-efs-from-bus", map[string]any{
		"type": "ingress", "securityGroupId": "sg-efs", "sourceSecurityGroupId": "sg-bus", "protocol": "tcp", "fromPort": 2049, "toPort": 2049,
	})

	// Common (read-only for agents) and the bus's JetStream store.
	accessPoint("flock-common-ap", "fsap-common", "/common", flock.DefaultUIDBase-1, "0755")
	accessPoint("flock-bus-ap", "fsap-bus", "/bus", flock.DefaultUIDBase, "0700")

	add(awsrules.TypeTaskDefinition, "flock-bus-task", map[string]any{
		"arn": "arn:aws:ecs:" + region + ":" + acct + ":task-definition/flock-bus:1", "family": "flock-bus",
		"networkMode": "awsvpc", "requiresCompatibilities": []any{"FARGATE"}, "cpu": "512", "memory": "1024",
		"volumes": []any{efsVolume("bus-store", "fsap-bus")},
		"containerDefinitions": container("bus", fmt.Sprintf("%d:%d", flock.DefaultUIDBase, flock.DefaultUIDBase),
			[]map[string]any{{"name": "FLOCK_BUS_CONFIG", "value": "/etc/flock/bus/nats.conf"}},
			[]map[string]any{{"name": "FLOCK_BUS_CONFIG_JSON", "valueFrom": secretArn("bus-config")}},
			[]map[string]any{{"sourceVolume": "bus-store", "containerPath": "/data", "readOnly": false}}),
		"tags": tags("bus", ""),
	})
	add(awsrules.TypeService, "flock-bus-svc", map[string]any{
		"cluster": "flock-cluster", "taskDefinition": "arn:aws:ecs:" + region + ":" + acct + ":task-definition/flock-bus:1",
		"desiredCount": 1, "launchType": "FARGATE",
		"networkConfiguration": map[string]any{"assignPublicIp": false, "subnets": []any{"subnet-a", "subnet-b"}, "securityGroups": []any{"sg-bus"}},
		"tags":                 tags("bus", ""),
	})

	for slot := 1; slot <= n; slot++ {
		id := fmt.Sprintf("agent-%d", slot)
		uid := flock.DefaultUIDBase + slot
		arn := fmt.Sprintf("arn:aws:ecs:%s:%s:task-definition/flock-%s:1", region, acct, id)
		accessPoint("flock-"+id+"-ap", "fsap-"+id, "/agents/"+id, uid, "0700")
		accessPoint("flock-"+id+"-logs-ap", "fsap-"+id+"-logs", "/logs/"+id, uid, "0700")
		add(awsrules.TypeTaskDefinition, "flock-"+id+"-task", map[string]any{
			"arn": arn, "family": "flock-" + id,
			"networkMode": "awsvpc", "requiresCompatibilities": []any{"FARGATE"}, "cpu": "256", "memory": "512",
			"executionRoleArn": "arn:aws:iam::" + acct + ":role/flock-exec",
			"taskRoleArn":      "arn:aws:iam::" + acct + ":role/flock-" + id,
			"volumes": []any{
				efsVolume("own", "fsap-"+id),
				efsVolume("log", "fsap-"+id+"-logs"),
				efsVolume("common", "fsap-common"),
			},
			"containerDefinitions": container("agent", fmt.Sprintf("%d:%d", uid, uid),
				[]map[string]any{
					{"name": "AGENT_ID", "value": id},
					{"name": "NATS_URL", "value": "nats://bus.flock.local:4222"},
					{"name": "SHARED_DIR", "value": protocol.ContainerSharedDir},
					{"name": "NATS_NKEY_FILE", "value": protocol.ContainerCredsFile},
				},
				[]map[string]any{{"name": "NATS_NKEY_SEED", "valueFrom": secretArn(id)}},
				[]map[string]any{
					{"sourceVolume": "own", "containerPath": protocol.ContainerAgentDir(id), "readOnly": false},
					{"sourceVolume": "log", "containerPath": protocol.ContainerSharedDir + "/logs", "readOnly": false},
					{"sourceVolume": "common", "containerPath": protocol.ContainerCommonDir(), "readOnly": true},
				}),
			"tags": tags("agent", id),
		})
		add(awsrules.TypeService, "flock-"+id+"-svc", map[string]any{
			"cluster": "flock-cluster", "taskDefinition": arn, "desiredCount": 1, "launchType": "FARGATE",
			"deploymentCircuitBreaker": map[string]any{"enable": true, "rollback": true},
			"networkConfiguration":     map[string]any{"assignPublicIp": false, "subnets": []any{"subnet-a", "subnet-b"}, "securityGroups": []any{"sg-agents"}},
			"tags":                     tags("agent", id),
		})
	}
	// The VPC's DNS firewall: the Cloud Map namespace allowed, the rest blocked.
	add(awsrules.TypeFirewallRuleGroup, "flock-dns-firewall", map[string]any{"id": "rslvr-frg-1", "name": "flock-dns-firewall"})
	add(awsrules.TypeFirewallDomainList, "flock-dns-flock-names", map[string]any{"id": "rslvr-fdl-1", "domains": []any{"*.flock.flock.internal"}})
	add(awsrules.TypeFirewallDomainList, "flock-dns-block-the-rest", map[string]any{"id": "rslvr-fdl-2", "domains": []any{"*"}})
	add(awsrules.TypeFirewallRule, "flock-dns-flock-names", map[string]any{"name": "flock-names", "action": "ALLOW", "priority": 100,
		"firewallRuleGroupId": "rslvr-frg-1", "firewallDomainListId": "rslvr-fdl-1"})
	add(awsrules.TypeFirewallRule, "flock-dns-block-the-rest", map[string]any{"name": "block-the-rest", "action": "BLOCK", "blockResponse": "NXDOMAIN", "priority": 9000,
		"firewallRuleGroupId": "rslvr-frg-1", "firewallDomainListId": "rslvr-fdl-2"})
	add(awsrules.TypeFirewallRuleGroupAssoc, "flock-dns-firewall", map[string]any{"name": "flock-dns-firewall", "firewallRuleGroupId": "rslvr-frg-1", "vpcId": "vpc-1", "priority": 100})
	add(awsrules.TypeFirewallConfig, "flock-dns-firewall", map[string]any{"resourceId": "vpc-1", "firewallFailOpen": "DISABLED"})
	return out
}
