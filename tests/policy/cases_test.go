package policy_test

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// breakCase is a stack that breaks exactly one policy: the dev stack as
// captured (3 agents) or the aws fixture (3 agents), with one change.
type breakCase struct {
	policy   string // the one policy that must fire
	resource string // the resource its message must name
	want     string // a fragment of the message's problem
	stack    string // "dev" or "aws"
	build    func(t testing.TB) []capture.Resource
}

func (c breakCase) name() string { return c.policy + "/" + c.resource }

const (
	agent1 = "flock-agent-1"
	agent2 = "flock-agent-2"
	agent3 = "flock-agent-3"
	bus    = "flock-bus"
)

// devWith edits one resource of the captured dev stack.
func devWith(typ, name string, f func(in map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource { return edit(t, dev(t, 3), typ, name, f) }
}

func awsWith(typ, name string, f func(in map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource { return edit(t, awsStack(3), typ, name, f) }
}

// capturedAWSWith edits one resource of the aws stack as the program
// declares it (the fixture has no endpoints).
func capturedAWSWith(typ, name string, f func(in map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource { return edit(t, awsCapture(t, 3), typ, name, f) }
}

func awsTask(name string, f func(c map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource {
		return editContainerDefs(t, awsStack(3), name, func(defs []map[string]any) { f(defs[0]) })
	}
}

func container(name string, f func(in map[string]any)) func(t testing.TB) []capture.Resource {
	return devWith(rules.TypeContainer, name, f)
}

// addMount appends a bind mount to a container's inputs.
func addMount(in map[string]any, source, target string, readOnly bool) {
	in["mounts"] = append(list(in["mounts"]), map[string]any{"type": "bind", "source": source, "target": target, "readOnly": readOnly})
}

// withoutMount drops the mount at target.
func withoutMount(in map[string]any, target string) {
	var keep []any
	for _, m := range list(in["mounts"]) {
		if obj(m)["target"] != target {
			keep = append(keep, m)
		}
	}
	in["mounts"] = keep
}

// efsVolumeOf returns the efsVolumeConfiguration of a task definition's volume.
func efsVolumeOf(in map[string]any, volume string) map[string]any {
	for _, v := range list(in["volumes"]) {
		if obj(v)["name"] == volume {
			return obj(obj(v)["efsVolumeConfiguration"])
		}
	}
	return nil
}

func breakCases() []breakCase {
	return append([]breakCase{
		// Docker containers.
		{policy: "container-non-root-user", resource: agent2, stack: "dev", want: `runs as root (user "0:0")`,
			build: container(agent2, func(in map[string]any) { in["user"] = "0:0" })},
		{policy: "container-non-root-user", resource: bus, stack: "dev", want: "user is not set",
			build: container(bus, func(in map[string]any) { delete(in, "user") })},
		{policy: "container-read-only-rootfs", resource: agent1, stack: "dev", want: "the root filesystem is writable",
			build: container(agent1, func(in map[string]any) { in["readOnly"] = false })},
		{policy: "container-drop-all-capabilities", resource: agent1, stack: "dev", want: "adds the capabilities [NET_ADMIN]",
			build: container(agent1, func(in map[string]any) {
				in["capabilities"] = map[string]any{"drops": []any{"ALL"}, "adds": []any{"NET_ADMIN"}}
			})},
		{policy: "container-drop-all-capabilities", resource: bus, stack: "dev", want: `capabilities.drops is [NET_RAW], not ["ALL"]`,
			build: container(bus, func(in map[string]any) { in["capabilities"] = map[string]any{"drops": []any{"NET_RAW"}} })},
		{policy: "container-no-new-privileges", resource: bus, stack: "dev", want: "lack no-new-privileges:true",
			build: container(bus, func(in map[string]any) { delete(in, "securityOpts") })},
		{policy: "container-not-privileged", resource: agent3, stack: "dev", want: "runs privileged",
			build: container(agent3, func(in map[string]any) { in["privileged"] = true })},
		{policy: "container-no-host-namespaces", resource: agent1, stack: "dev", want: `pidMode is "host"`,
			build: container(agent1, func(in map[string]any) { in["pidMode"] = "host" })},
		{policy: "container-no-host-namespaces", resource: agent2, stack: "dev", want: `ipcMode is "container:flock-agent-1"`,
			build: container(agent2, func(in map[string]any) { in["ipcMode"] = "container:flock-agent-1" })},
		{policy: "container-memory-cpu-limits", resource: agent1, stack: "dev", want: "memorySwap is not set, not equal to memory 256",
			build: container(agent1, func(in map[string]any) { delete(in, "memorySwap") })},
		{policy: "container-memory-cpu-limits", resource: bus, stack: "dev", want: "has no CPU limit",
			build: container(bus, func(in map[string]any) { delete(in, "cpus") })},
		{policy: "container-process-limit", resource: agent2, stack: "dev", want: "has no nproc ulimit",
			build: container(agent2, func(in map[string]any) {
				var keep []any
				for _, u := range list(in["ulimits"]) {
					if obj(u)["name"] != "nproc" {
						keep = append(keep, u)
					}
				}
				in["ulimits"] = keep
			})},
		{policy: "container-published-ports", resource: agent1, stack: "dev", want: "publishes container port 8080 on 127.0.0.1",
			build: container(agent1, func(in map[string]any) {
				in["ports"] = []any{map[string]any{"internal": 8080, "external": 8080, "ip": "127.0.0.1", "protocol": "tcp"}}
			})},
		{policy: "container-published-ports", resource: bus, stack: "dev", want: "publishes container port 4222 on 0.0.0.0",
			build: container(bus, func(in map[string]any) { obj(list(in["ports"])[0])["ip"] = "0.0.0.0" })},
		{policy: "container-no-sensitive-host-paths", resource: bus, stack: "dev", want: "bind-mounts the host path /var/run/docker.sock",
			build: container(bus, func(in map[string]any) { addMount(in, "/var/run/docker.sock", "/var/run/docker.sock", true) })},
		{policy: "container-not-default-bridge", resource: bus, stack: "dev", want: "joins no network of its own (networkMode bridge, networksAdvanced empty), so it runs on the default bridge",
			build: container(bus, func(in map[string]any) { in["networkMode"] = "bridge"; delete(in, "networksAdvanced") })},
		{policy: "container-not-default-bridge", resource: bus, stack: "dev", want: "joins no network of its own (networkMode not set, networksAdvanced empty)",
			build: container(bus, func(in map[string]any) { delete(in, "networksAdvanced") })},
		{policy: "container-no-unconfined-profile", resource: agent1, stack: "dev", want: `securityOpts has "seccomp=unconfined"`,
			build: container(agent1, func(in map[string]any) { in["securityOpts"] = append(list(in["securityOpts"]), "seccomp=unconfined") })},
		{policy: "container-healthcheck", resource: bus, stack: "dev", want: "has no healthcheck",
			build: container(bus, func(in map[string]any) { delete(in, "healthcheck") })},
		{policy: "container-own-shared-dirs", resource: agent2, stack: "dev", want: "mounts /srv/flock/scratch at /scratch, which is none of the agent's own mounts",
			build: container(agent2, func(in map[string]any) { addMount(in, "/srv/flock/scratch", "/scratch", false) })},
		{policy: "container-own-shared-dirs", resource: agent3, stack: "dev", want: "mounts the host path /srv/flock/shared/agents/agent-1 at /shared/agents/agent-3, which is not its own directory",
			build: func(t testing.TB) []capture.Resource {
				// agent-3's own directory mount points at agent-1's directory, and
				// agent-1 is gone, so only the mount itself is wrong.
				rs := remove(t, dev(t, 3), rules.TypeContainer, agent1)
				return edit(t, rs, rules.TypeContainer, agent3, func(in map[string]any) {
					for _, m := range list(in["mounts"]) {
						if obj(m)["target"] == "/shared/agents/agent-3" {
							obj(m)["source"] = "/srv/flock/shared/agents/agent-1"
						}
					}
				})
			}},
		{policy: "docker-flock-labels", resource: "flock-agent-3-net", stack: "dev", want: "has no ai-flock.flock label",
			build: devWith(rules.TypeNetwork, "flock-agent-3-net", func(in map[string]any) {
				var keep []any
				for _, l := range list(in["labels"]) {
					if obj(l)["label"] != protocol.LabelFlock {
						keep = append(keep, l)
					}
				}
				in["labels"] = keep
			})},
		{policy: "docker-flock-labels", resource: agent1, stack: "dev", want: `has the ai-flock.role label "worker"`,
			build: container(agent1, func(in map[string]any) {
				for _, l := range list(in["labels"]) {
					if obj(l)["label"] == protocol.LabelRole {
						obj(l)["value"] = "worker"
					}
				}
			})},
		// Docker networks.
		{policy: "network-agent-internal", resource: "flock-agent-1-net", stack: "dev", want: "is an agent network that is not internal",
			build: devWith(rules.TypeNetwork, "flock-agent-1-net", func(in map[string]any) { in["internal"] = false })},
		// ECS task definitions.
		{policy: "ecs-task-awsvpc", resource: "flock-agent-1-task", stack: "aws", want: "networkMode is bridge, not awsvpc",
			build: awsWith(awsrules.TypeTaskDefinition, "flock-agent-1-task", func(in map[string]any) { in["networkMode"] = "bridge" })},
		{policy: "ecs-task-non-root-user", resource: "flock-agent-2-task", stack: "aws", want: `container "agent" has no user`,
			build: awsTask("flock-agent-2-task", func(c map[string]any) { delete(c, "user") })},
		{policy: "ecs-task-non-root-user", resource: "flock-bus-task", stack: "aws", want: `container "bus": user "nats" is not a numeric UID:GID`,
			build: awsTask("flock-bus-task", func(c map[string]any) { c["user"] = "nats" })},
		{policy: "ecs-task-read-only-rootfs", resource: "flock-agent-1-task", stack: "aws", want: `container "agent" has a writable root filesystem`,
			build: awsTask("flock-agent-1-task", func(c map[string]any) { c["readonlyRootFilesystem"] = false })},
		{policy: "ecs-task-not-privileged", resource: "flock-agent-3-task", stack: "aws", want: `container "agent" runs privileged`,
			build: awsTask("flock-agent-3-task", func(c map[string]any) { c["privileged"] = true })},
		{policy: "ecs-task-drop-all-capabilities", resource: "flock-agent-1-task", stack: "aws", want: `container "agent" does not drop all capabilities`,
			build: awsTask("flock-agent-1-task", func(c map[string]any) {
				c["linuxParameters"] = map[string]any{"capabilities": map[string]any{"drop": []any{"NET_RAW"}}}
			})},
		{policy: "ecs-task-memory-limits", resource: "flock-agent-2-task", stack: "aws", want: "the task has no memory limit",
			build: awsWith(awsrules.TypeTaskDefinition, "flock-agent-2-task", func(in map[string]any) { delete(in, "memory") })},
		{policy: "ecs-task-logging", resource: "flock-agent-1-task", stack: "aws", want: `container "agent" has no log driver`,
			build: awsTask("flock-agent-1-task", func(c map[string]any) { delete(c, "logConfiguration") })},
		{policy: "ecs-task-no-secret-env", resource: "flock-agent-1-task", stack: "aws", want: "has an nkey seed in its plain environment (variable NATS_SEED)",
			build: awsTask("flock-agent-1-task", func(c map[string]any) {
				c["environment"] = append(list(c["environment"]), map[string]any{"name": "NATS_SEED", "value": testSeed})
			})},
		// A proxy URL carrying an agent's gateway token comes from a secret on aws.
		{policy: "ecs-task-no-secret-env", resource: "flock-agent-1-task", stack: "aws", want: "has a URL with a password in it in its plain environment (variable HTTPS_PROXY)",
			build: awsTask("flock-agent-1-task", func(c map[string]any) {
				c["environment"] = append(list(c["environment"]), map[string]any{"name": "HTTPS_PROXY", "value": "http://agent:0f3a9c@gateway.flock.flock.internal:8080"})
			})},
		{policy: "ecs-task-no-secret-env", resource: "flock-bus-task", stack: "aws", want: "has a secret-looking value in its plain environment (variable DB_PASSWORD)",
			build: awsTask("flock-bus-task", func(c map[string]any) {
				c["environment"] = append(list(c["environment"]), map[string]any{"name": "DB_PASSWORD", "value": "hunter2"})
			})},
		{policy: "ecs-task-efs-encryption-iam", resource: "flock-agent-1-task", stack: "aws", want: `EFS volume "own" is mounted without transit encryption`,
			build: awsWith(awsrules.TypeTaskDefinition, "flock-agent-1-task", func(in map[string]any) {
				efsVolumeOf(in, "own")["transitEncryption"] = "DISABLED"
			})},
		{policy: "ecs-task-efs-encryption-iam", resource: "flock-agent-2-task", stack: "aws", want: `EFS volume "common" is mounted without IAM authorization`,
			build: awsWith(awsrules.TypeTaskDefinition, "flock-agent-2-task", func(in map[string]any) {
				obj(efsVolumeOf(in, "common")["authorizationConfig"])["iam"] = "DISABLED"
			})},
		{policy: "ecs-task-efs-access-point", resource: "flock-bus-task", stack: "aws", want: `EFS volume "bus-store" mounts the file system without an access point`,
			build: awsWith(awsrules.TypeTaskDefinition, "flock-bus-task", func(in map[string]any) {
				efs := efsVolumeOf(in, "bus-store")
				delete(obj(efs["authorizationConfig"]), "accessPointId")
				efs["rootDirectory"] = "/bus"
			})},
		// ECS services, EFS, security groups, logs.
		{policy: "ecs-service-no-public-ip", resource: "flock-agent-3-svc", stack: "aws", want: "assigns public IPs to its tasks",
			build: awsWith(awsrules.TypeService, "flock-agent-3-svc", func(in map[string]any) {
				obj(in["networkConfiguration"])["assignPublicIp"] = true
			})},
		{policy: "vpc-endpoint-own-account", resource: "flock-endpoint-logs", stack: "aws", want: "has no policy: AWS attaches its default",
			build: capturedAWSWith(awsrules.TypeVpcEndpoint, "flock-endpoint-logs", func(in map[string]any) { delete(in, "policy") })},
		{policy: "vpc-endpoint-own-account", resource: "flock-endpoint-secretsmanager", stack: "aws", want: "statement 1 of the endpoint policy allows callers of any account",
			build: capturedAWSWith(awsrules.TypeVpcEndpoint, "flock-endpoint-secretsmanager", func(in map[string]any) {
				in["policy"] = `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Principal":"*","Action":"*","Resource":"*"}}`
			})},
		{policy: "efs-encrypted", resource: "flock-efs", stack: "aws", want: "the file system is not encrypted at rest",
			build: awsWith(awsrules.TypeFileSystem, "flock-efs", func(in map[string]any) { in["encrypted"] = false })},
		{policy: "efs-access-point-posix-user", resource: "flock-common-ap", stack: "aws", want: "has no POSIX user",
			build: awsWith(awsrules.TypeAccessPoint, "flock-common-ap", func(in map[string]any) { delete(in, "posixUser") })},
		{policy: "efs-access-point-posix-user", resource: "flock-bus-ap", stack: "aws", want: "forces the POSIX user 0:0, which is root",
			build: awsWith(awsrules.TypeAccessPoint, "flock-bus-ap", func(in map[string]any) { in["posixUser"] = map[string]any{"uid": 0, "gid": 0} })},
		{policy: "efs-access-point-root-path", resource: "flock-spare-ap", stack: "aws", want: "its root directory is /: it exposes the whole file system",
			build: spareAccessPoint("/")},
		{policy: "security-group-no-world-ingress", resource: "flock-bus-sg", stack: "aws", want: "an ingress rule (ports 4222-4222) admits 0.0.0.0/0",
			build: awsWith(awsrules.TypeSecurityGroup, "flock-bus-sg", func(in map[string]any) {
				obj(list(in["ingress"])[0])["cidrBlocks"] = []any{"0.0.0.0/0"}
			})},
		{policy: "security-group-no-world-ingress", resource: "flock-efs-from-agents", stack: "aws", want: "admits 0.0.0.0/0 (ports 2049-2049)",
			build: awsWith(awsrules.TypeSGIngressRule, "flock-efs-from-agents", func(in map[string]any) {
				delete(in, "referencedSecurityGroupId")
				in["cidrIpv4"] = "0.0.0.0/0"
			})},
		{policy: "security-group-no-world-ingress", resource: "flock-efs-from-bus", stack: "aws", want: "admits ::/0 (ports 2049-2049)",
			build: awsWith(awsrules.TypeSecurityGroupRule, "flock-efs-from-bus", func(in map[string]any) {
				delete(in, "sourceSecurityGroupId")
				in["ipv6CidrBlocks"] = []any{"::/0"}
			})},
		{policy: "log-group-retention", resource: "flock-logs", stack: "aws", want: "keeps logs forever",
			build: awsWith(awsrules.TypeLogGroup, "flock-logs", func(in map[string]any) { delete(in, "retentionInDays") })},
		// Stack policies, dev.
		{policy: "stack-unique-agent-uid", resource: agent2, stack: "dev", want: `runs as UID 20001 like "flock-agent-1"`,
			build: container(agent2, func(in map[string]any) { in["user"] = "20001:20001" })},
		{policy: "stack-agent-own-directory", resource: agent2, stack: "dev", want: "agent agent-2 has no directory of its own mounted at /shared/agents/agent-2",
			build: container(agent2, func(in map[string]any) { withoutMount(in, "/shared/agents/agent-2") })},
		{policy: "stack-agent-own-network", resource: agent2, stack: "dev", want: `agent agent-2 joins the network "flock-agent-1-net", which is labelled for agent "agent-1"`,
			build: container(agent2, func(in map[string]any) { obj(list(in["networksAdvanced"])[0])["name"] = "flock-agent-1-net" })},
		{policy: "stack-nothing-private-shared", resource: bus, stack: "dev", want: "mounts the host path /srv/flock/shared at /mnt/shared, which holds agent agent-1's private directory",
			build: container(bus, func(in map[string]any) { addMount(in, "/srv/flock/shared", "/mnt/shared", true) })},
		// The model gateway.
		{policy: "container-no-key-in-agent-env", resource: agent2, stack: "dev", want: "gives the agent the variable ANTHROPIC_API_KEY, named like a credential",
			build: container(agent2, func(in map[string]any) { in["envs"] = append(list(in["envs"]), "ANTHROPIC_API_KEY=hunter2") })},
		// The placeholder is let through in the SDKs' key variables only.
		{policy: "container-no-key-in-agent-env", resource: agent2, stack: "dev", want: "gives the agent the variable OTHER_API_KEY, named like a credential",
			build: container(agent2, func(in map[string]any) {
				in["envs"] = append(list(in["envs"]), "OTHER_API_KEY="+protocol.GatewayPlaceholderKey)
			})},
		{policy: "container-no-key-in-agent-env", resource: agent3, stack: "dev", want: "gives the agent MODEL_CREDENTIAL with a value shaped like a provider's key",
			build: container(agent3, func(in map[string]any) { in["envs"] = append(list(in["envs"]), "MODEL_CREDENTIAL=sk-ant-api03-xyz") })},
		{policy: "gateway-egress-ways-out", resource: "flock-gateway-config", stack: "dev", want: "lets agent-1 open a blind tunnel to pypi.org:443",
			build: func(t testing.TB) []capture.Resource {
				return edit(t, devGateway(t), rules.TypeCommand, "flock-gateway-config", func(in map[string]any) {
					in["environment"] = map[string]any{protocol.EnvGatewayEgressRules: `[{"host":"pypi.org","port":443,"tunnel":true,"agents":["agent-1"]}]`}
				})
			}},
		{policy: "gateway-egress-ways-out", resource: "flock-gateway-config", stack: "dev", want: "verifies registry.example.com:443 against roots besides the system's",
			build: func(t testing.TB) []capture.Resource {
				return edit(t, devGateway(t), rules.TypeCommand, "flock-gateway-config", func(in map[string]any) {
					in["environment"] = map[string]any{protocol.EnvGatewayEgressRules: `[{"host":"registry.example.com","port":443,"roots":"-----BEGIN CERTIFICATE-----"}]`}
				})
			}},
		// On aws the rules travel in the gateway's task definition, as the stack renders them.
		{policy: "gateway-egress-ways-out", resource: "flock-gateway-task", stack: "aws", want: "lets agent-2 open a blind tunnel to pypi.org:443",
			build: func(t testing.TB) []capture.Resource {
				s, err := capture.RunStack("aws", capture.Config{
					"flock:gateway":         `{"upstreams": {"anthropic": {}}, "egress": [{"host": "pypi.org", "tunnel": true, "agents": ["agent-2"]}]}`,
					"flock:anthropicApiKey": gatewayKey,
				}, "flock:anthropicApiKey")
				if err != nil {
					t.Fatal(err)
				}
				return withProviderIDs(s.Resources)
			}},
		{policy: "stack-no-agent-on-egress", resource: "flock-agent-2-gateway-link", stack: "dev", want: `connects agent agent-2 to the egress network "flock-egress"`,
			build: func(t testing.TB) []capture.Resource {
				return edit(t, devGateway(t), rules.TypeCommand, "flock-agent-2-gateway-link", func(in map[string]any) {
					in["create"] = "docker network connect flock-egress flock-agent-2"
				})
			}},
		{policy: "stack-services-apart", resource: "flock-services", stack: "dev", want: `puts the services on the network "flock-bus-net", which is not their own`,
			build: container("flock-services", func(in map[string]any) { obj(list(in["networksAdvanced"])[0])["name"] = "flock-bus-net" })},
		{policy: "stack-services-apart", resource: "flock-services", stack: "dev", want: `puts the services on "flock-services-net", which is not internal`,
			build: func(t testing.TB) []capture.Resource {
				return edit(t, dev(t, 3), rules.TypeNetwork, "flock-services-net", func(in map[string]any) { in["internal"] = false })
			}},
		{policy: "stack-services-apart", resource: "flock-gateway", stack: "dev", want: `joins the services' network "flock-services-net"`,
			build: func(t testing.TB) []capture.Resource {
				return edit(t, devGateway(t), rules.TypeContainer, "flock-gateway", func(in map[string]any) {
					in["networksAdvanced"] = append(list(in["networksAdvanced"]), map[string]any{"name": "flock-services-net"})
				})
			}},
		{policy: "stack-pids-limit-step", resource: agent2, stack: "dev", want: `no step sets the cgroup PIDs limit of agent agent-2's container "flock-agent-2"`,
			build: func(t testing.TB) []capture.Resource {
				return edit(t, dev(t, 3), rules.TypeCommand, "flock-agent-2-bus-link", func(in map[string]any) {
					in["create"], _, _ = strings.Cut(in["create"].(string), " && docker update")
				})
			}},
		{policy: "stack-pids-limit-step", resource: agent3, stack: "dev", want: `the step "flock-agent-3-bus-link" does not depend on the container`,
			build: func(t testing.TB) []capture.Resource {
				rs := dev(t, 3)
				rs[find(t, rs, rules.TypeCommand, "flock-agent-3-bus-link")].Deps = nil
				return rs
			}},
		// Stack policies, aws.
		{policy: "stack-unique-agent-uid", resource: "flock-agent-2-task", stack: "aws", want: `runs as UID 20001 like the task definition "flock-agent-1-task"`,
			build: func(t testing.TB) []capture.Resource {
				rs := awsTask("flock-agent-2-task", func(c map[string]any) { c["user"] = "20001:20001" })(t)
				for _, ap := range []string{"flock-agent-2-ap", "flock-agent-2-logs-ap"} {
					rs = edit(t, rs, awsrules.TypeAccessPoint, ap, func(in map[string]any) {
						in["posixUser"] = map[string]any{"uid": 20001, "gid": 20001}
						ci := obj(obj(in["rootDirectory"])["creationInfo"])
						ci["ownerUid"], ci["ownerGid"] = 20001, 20001
					})
				}
				return rs
			}},
		{policy: "stack-bus-routes-self-only", resource: "flock-bus-sg", stack: "aws", want: `admits the NATS route port 6222 of the bus's group flock-bus-sg from the security group "flock-agents-sg"`,
			build: awsWith(awsrules.TypeSecurityGroup, "flock-bus-sg", func(in map[string]any) {
				in["ingress"] = append(list(in["ingress"]), map[string]any{"protocol": "tcp", "fromPort": 6222, "toPort": 6222, "securityGroups": []any{"sg-bus", "sg-agents"}})
			})},
		{policy: "stack-bus-routes-self-only", resource: "flock-bus-routes-vpn", stack: "aws", want: "from 10.8.0.0/16: only the bus nodes may join the cluster",
			build: func(t testing.TB) []capture.Resource {
				rs := awsStack(3)
				r := rs[find(t, rs, awsrules.TypeSecurityGroupRule, "flock-efs-from-bus")]
				r.Name = "flock-bus-routes-vpn"
				r.Inputs = resource.NewPropertyMapFromMap(map[string]any{
					"type": "ingress", "securityGroupId": "sg-bus", "cidrBlocks": []any{"10.8.0.0/16"}, "protocol": "tcp", "fromPort": 6000, "toPort": 6999,
				})
				return append(rs, r)
			}},
		{policy: "stack-bus-routes-self-only", resource: "flock-bus-from-agents-all", stack: "aws", want: `from the security group "flock-agents-sg"`,
			build: allTrafficIngress("flock-bus-from-agents-all", "sg-bus", "sg-agents")},
		{policy: "stack-agent-own-directory", resource: "flock-agent-2-task", stack: "aws", want: "agent agent-2 has no access point of its own (root /agents/agent-2)",
			build: func(t testing.TB) []capture.Resource {
				return remove(t, awsStack(3), awsrules.TypeAccessPoint, "flock-agent-2-ap")
			}},
		{policy: "stack-agent-own-directory", resource: "flock-agent-3-ap", stack: "aws", want: "creates agent agent-3's directory with permissions 0755",
			build: awsWith(awsrules.TypeAccessPoint, "flock-agent-3-ap", func(in map[string]any) {
				obj(obj(in["rootDirectory"])["creationInfo"])["permissions"] = "0755"
			})},
		{policy: "stack-agent-own-network", resource: "flock-agents-self", stack: "aws", want: `adds ingress to the agents' security group "flock-agents-sg"`,
			build: allTrafficIngress("flock-agents-self", "sg-agents", "sg-agents")},
		{policy: "stack-nothing-private-shared", resource: "flock-agent-2-task", stack: "aws", want: `EFS volume "peer" reaches /agents/agent-1, which holds agent agent-1's private directory`,
			build: awsWith(awsrules.TypeTaskDefinition, "flock-agent-2-task", func(in map[string]any) {
				peer := map[string]any{"name": "peer", "efsVolumeConfiguration": map[string]any{
					"fileSystemId": "fs-0123456789abcdef0", "transitEncryption": "ENABLED",
					"authorizationConfig": map[string]any{"accessPointId": "fsap-agent-1", "iam": "ENABLED"},
				}}
				in["volumes"] = append(list(in["volumes"]), peer)
			})},
		{policy: "stack-nothing-private-shared", resource: "flock-agent-1-task", stack: "aws", want: `container "agent" mounts the shared access point "flock-common-ap" (volume "common", shared by agent agent-1, agent agent-2, agent agent-3) read-write at /shared/common`,
			build: awsTask("flock-agent-1-task", func(c map[string]any) {
				for _, m := range list(c["mountPoints"]) {
					if obj(m)["sourceVolume"] == "common" {
						obj(m)["readOnly"] = false
					}
				}
			})},
	}, append(append(gatewayBreakCases(), awsInputBreakCases()...), awsServicesBreakCases()...)...)
}

// testSeed is a made-up nkey seed (the shape of one, not a real credential).
const testSeed = "SUAGMJH5XLGZKQQWAWKRZJIGMOU4HPFUYLXJMXOO5NLFEO2OOQJ5LPRDPM"

// spareAccessPoint is the aws stack with one more access point, rooted at
// root: a new one, mounted by no task (or stack-nothing-private-shared
// fires too).
func spareAccessPoint(root string) func(testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource {
		rs := awsStack(3)
		spare := rs[find(t, rs, awsrules.TypeAccessPoint, "flock-common-ap")]
		spare.Name = "flock-spare-ap"
		in := spare.Inputs.Mappable()
		in["id"] = "fsap-spare"
		obj(in["rootDirectory"])["path"] = root
		spare.Inputs = resource.NewPropertyMapFromMap(in)
		return append(rs, spare)
	}
}

// allTrafficIngress is the aws stack with one more ingress rule, named name:
// all traffic into the group sg from the group from.
func allTrafficIngress(name, sg, from string) func(testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource {
		rs := awsStack(3)
		r := rs[find(t, rs, awsrules.TypeSGIngressRule, "flock-efs-from-agents")]
		r.Name = name
		r.Inputs = resource.NewPropertyMapFromMap(map[string]any{
			"securityGroupId": sg, "referencedSecurityGroupId": from, "ipProtocol": "-1",
		})
		return append(rs, r)
	}
}
