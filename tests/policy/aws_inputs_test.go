package policy_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

var (
	awsCapMu sync.Mutex
	awsCap3  []capture.Resource
)

// awsCaptured is the captured aws stack (3 agents, three bus nodes, as
// Pulumi.aws.yaml declares it), captured once; each call gets a copy.
func awsCaptured(t testing.TB) []capture.Resource {
	t.Helper()
	awsCapMu.Lock()
	defer awsCapMu.Unlock()
	if awsCap3 == nil {
		awsCap3 = awsCapture(t, 3)
	}
	return clone(awsCap3)
}

// capturedWith edits one resource of the captured aws stack.
func capturedWith(typ, name string, f func(in map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource { return edit(t, awsCaptured(t), typ, name, f) }
}

// capturedTask edits the container of a captured task definition.
func capturedTask(name string, f func(c map[string]any)) func(t testing.TB) []capture.Resource {
	return func(t testing.TB) []capture.Resource {
		return editContainerDefs(t, awsCaptured(t), name, func(defs []map[string]any) { f(defs[0]) })
	}
}

// The apostrophe the EFS group's description had ("from the flock's
// tasks"): EC2 refuses it with InvalidParameterValue, at deploy.
const apostrophe = "AI Flock EFS: NFS 2049 from the flock's tasks"

// awsInputBreakCases break, each, one rule of the table of what AWS
// accepts (infra/awsrules) on the captured aws stack or the aws fixture.
func awsInputBreakCases() []breakCase {
	return []breakCase{
		{policy: "aws-security-group-text", resource: "flock-efs-sg", stack: "aws",
			want:  `its security group description "` + apostrophe + `" holds the character '\''; security group description: at most 255 characters of a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$* (EC2 API Reference, CreateSecurityGroup, GroupDescription)`,
			build: capturedWith(awsrules.TypeSecurityGroup, "flock-efs-sg", func(in map[string]any) { in["description"] = apostrophe })},
		{policy: "aws-security-group-text", resource: "flock-sg-agents-to-bus", stack: "aws", want: `its security group rule description "NATS to the \"bus\"" holds the character '"'`,
			build: capturedWith(awsrules.TypeSecurityGroupRule, "flock-sg-agents-to-bus", func(in map[string]any) { in["description"] = `NATS to the "bus"` })},
		{policy: "aws-security-group-text", resource: "flock-bus-sg", stack: "aws", want: `an inline ingress rule: its security group rule description "NATS from agents’" holds the character '’'`,
			build: awsWith(awsrules.TypeSecurityGroup, "flock-bus-sg", func(in map[string]any) { obj(list(in["ingress"])[0])["description"] = "NATS from agents’" })},
		{policy: "aws-security-group-text", resource: "flock-agents-sg", stack: "aws", want: `its security group name "sg-agents" starts with the reserved prefix "sg-"`,
			build: capturedWith(awsrules.TypeSecurityGroup, "flock-agents-sg", func(in map[string]any) { in["name"] = "sg-agents" })},
		{policy: "aws-iam-names", resource: "flock-agent-1-exec-role", stack: "aws", want: `its IAM role name prefix "` + strings.Repeat("r", 39) + `" (the provider appends 26 characters) is 39 characters long`,
			build: capturedWith(awsrules.TypeRole, "flock-agent-1-exec-role", func(in map[string]any) { in["namePrefix"] = strings.Repeat("r", 39) })},
		{policy: "aws-iam-names", resource: "flock-agent-2-task-role", stack: "aws", want: `its IAM role description "AI Flock: €" holds the character '€'`,
			build: capturedWith(awsrules.TypeRole, "flock-agent-2-task-role", func(in map[string]any) { in["description"] = "AI Flock: €" })},
		{policy: "aws-iam-names", resource: "flock-bus-1-exec-policy", stack: "aws", want: `its IAM role policy name "bus 1" holds the character ' '`,
			build: capturedWith(awsrules.TypeRolePolicy, "flock-bus-1-exec-policy", func(in map[string]any) { in["name"] = "bus 1" })},
		{policy: "aws-ecs-names", resource: "flock-bus-task", stack: "aws", want: `its ECS task definition family "flock.bus" holds the character '.'`,
			build: awsWith(awsrules.TypeTaskDefinition, "flock-bus-task", func(in map[string]any) { in["family"] = "flock.bus" })},
		{policy: "aws-ecs-names", resource: "flock-agent-1-task", stack: "aws", want: `its ECS container name "` + strings.Repeat("c", 256) + `" is 256 characters long`,
			build: capturedTask("flock-agent-1-task", func(c map[string]any) { c["name"] = strings.Repeat("c", 256) })},
		{policy: "aws-ecs-names", resource: "flock-agent-3", stack: "aws", want: `its ECS service name "flock/agent-3" holds the character '/'`,
			build: capturedWith(awsrules.TypeService, "flock-agent-3", func(in map[string]any) { in["name"] = "flock/agent-3" })},
		{policy: "aws-ecs-health-check", resource: "flock-agent-1-task", stack: "aws", want: `container "agent": healthCheck.interval is 1; ECS health check interval: 5 to 300 seconds (ECS API Reference, HealthCheck, interval)`,
			build: capturedTask("flock-agent-1-task", func(c map[string]any) { obj(c["healthCheck"])["interval"] = 1 })},
		{policy: "aws-ecs-health-check", resource: "flock-bus-1-task", stack: "aws", want: `container "bus": healthCheck.startPeriod is 301`,
			build: capturedTask("flock-bus-1-task", func(c map[string]any) { obj(c["healthCheck"])["startPeriod"] = 301 })},
		{policy: "aws-log-group-name", resource: "flock-logs", stack: "aws", want: `its CloudWatch log group name "/ai-flock/flock:main" holds the character ':'`,
			build: awsWith(awsrules.TypeLogGroup, "flock-logs", func(in map[string]any) { in["name"] = "/ai-flock/flock:main" })},
		{policy: "aws-cloud-map-names", resource: "flock-bus-2-discovery", stack: "aws", want: `its Cloud Map service name "bus_2" holds the character '_'`,
			build: capturedWith(awsrules.TypeDiscoveryService, "flock-bus-2-discovery", func(in map[string]any) { in["name"] = "bus_2" })},
		{policy: "aws-cloud-map-names", resource: "flock-namespace", stack: "aws", want: `its Cloud Map namespace name "flock..internal" is not of that form`,
			build: capturedWith(awsrules.TypeNamespace, "flock-namespace", func(in map[string]any) { in["name"] = "flock..internal" })},
		{policy: "aws-ecr-repository-name", resource: "flock-images", stack: "aws", want: `its ECR repository name "Flock-Images" holds the character 'F'`,
			build: capturedWith(awsrules.TypeRepository, "flock-images", func(in map[string]any) { in["name"] = "Flock-Images" })},
		{policy: "aws-efs-access-point-path", resource: "flock-spare-ap", stack: "aws", want: `its EFS access point root directory path "/common/one/two/three/four" is 5 directory levels deep`,
			build: spareAccessPoint("/common/one/two/three/four")},
		{policy: "aws-secret-name", resource: "flock-agent-1-nkey", stack: "aws", want: `its Secrets Manager secret name "flock agent-1 nkey" holds the character ' '`,
			build: capturedWith(awsrules.TypeSecret, "flock-agent-1-nkey", func(in map[string]any) { in["name"] = "flock agent-1 nkey" })},
		{policy: "aws-tags", resource: "flock-efs", stack: "aws", want: `its tag key "aws:owner" starts with the reserved prefix "aws:"`,
			build: capturedWith(awsrules.TypeFileSystem, "flock-efs", func(in map[string]any) { obj(in["tags"])["aws:owner"] = "me" })},
		{policy: "aws-tags", resource: "flock-cluster", stack: "aws", want: `tag "team": its tag value "a*b" holds the character '*'`,
			build: capturedWith(awsrules.TypeCluster, "flock-cluster", func(in map[string]any) { obj(in["tags"])["team"] = "a*b" })},
	}
}

// The apostrophe, in the shape of a preview of a new stack (the outputs of
// other resources unknown): the description is a literal, known at preview,
// and the mandatory rule refuses it there, before EC2 ever sees it.
func TestApostropheBlocksThePreview(t *testing.T) {
	rs := previewOfNewStack(edit(t, awsCaptured(t), awsrules.TypeSecurityGroup, "flock-efs-sg", func(in map[string]any) { in["description"] = apostrophe }))
	vs := check("aws", rs)
	if got := policyNames(vs); len(got) != 1 || got[0] != "aws-security-group-text" {
		t.Fatalf("policies reporting %v, want [aws-security-group-text]:%s", got, messages(vs))
	}
	for _, p := range rules.All() {
		if p.Name == "aws-security-group-text" && p.Level != rules.Mandatory {
			t.Errorf("%s is %v: an apostrophe must stop the preview", p.Name, p.Level)
		}
	}
	if msg := vs[0].Message(); !strings.Contains(msg, `"flock-efs-sg"`) || !strings.Contains(msg, "CreateSecurityGroup, GroupDescription") {
		t.Errorf("the message does not name the group and the rule: %s", msg)
	}
}

// The two checks agree at the edge: a flock:name and agent ID that make
// role names of exactly 64 characters pass config validation, and the
// stack declared from them passes the pack; one character more is refused
// by the configuration (tests/stacks: TestAWSConfigRefusesNamesAWSWouldRefuse).
func TestAWSStackAtTheNameLimitPasses(t *testing.T) {
	rs := awsCaptureWith(t, capture.Config{
		"flock:name": "fourteen-chars", "flock:agentCount": "",
		"flock:agents": `[{"id": "a-31-character-agent-identifier", "slot": 1}]`,
	})
	seen := assertClean(t, "aws", rs)
	if seen["aws-iam-names"] < 2*5 { // two roles per task: the agent, three bus nodes, the operator
		t.Errorf("aws-iam-names inspected %d resources", seen["aws-iam-names"])
	}
}
