package stacks_test

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// awsShapes are the aws stack in each shape that declares other security
// groups, rules or roles: the default (three bus nodes, endpoints), one bus
// node, NAT egress with operator ranges, and a model gateway.
func awsShapes(t *testing.T) map[string]*capture.Stack {
	return map[string]*capture.Stack{
		"default":  awsStack(t, capture.Config{}),
		"one bus":  awsStack(t, capture.Config{"flock:bus": `{"replicas": 1}`}),
		"nat":      awsStack(t, capture.Config{"flock:aws": `{"egress": "nat", "operatorCidrs": ["10.8.0.0/16"]}`}),
		"gateway":  awsGatewayStack(t, capture.Config{"flock:gateway": `{"upstreams": {"anthropic": {}}, "budgetTokens": 5000}`}),
		"spans":    awsGatewayStack(t, capture.Config{"flock:otlp": `{"endpoint": "http://collector.example.internal:4318"}`}),
		"existing": awsStack(t, capture.Config{"flock:aws": `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`}),
	}
}

// Every description the aws stack writes is one AWS accepts: EC2 refuses a
// security group (or rule) description with, say, an apostrophe
// (InvalidParameterValue), and only at deploy time.
func TestAWSDescriptionsAWSAccepts(t *testing.T) {
	for shape, s := range awsShapes(t) {
		checked := 0
		for _, c := range []struct {
			typ  string
			key  string
			rule awsrules.Rule
		}{
			{awsrules.TypeSecurityGroup, "description", awsrules.SecurityGroupDescription},
			{awsrules.TypeSecurityGroupRule, "description", awsrules.SecurityGroupRuleDescription},
			{awsrules.TypeRole, "description", awsrules.IAMRoleDescription},
		} {
			for _, r := range s.ByType(c.typ) {
				checked++
				if err := c.rule.Check(r.String(c.key)); err != nil {
					t.Errorf("%s: %s: %v", shape, r.Name, err)
				}
			}
		}
		if checked < 20 {
			t.Errorf("%s: only %d descriptions checked", shape, checked)
		}
	}
}

// Through the real program: a flock whose names AWS would refuse is refused
// with every such name at once, by key, and nothing is declared.
func TestAWSConfigRefusesNamesAWSWouldRefuse(t *testing.T) {
	s, err := capture.RunAWS(capture.Config{
		"flock:name":       "a-20-character-flock",
		"flock:agentCount": "",
		"flock:agents":     `[{"id": "agent-1"}, {"id": "a-31-character-agent-identifier", "slot": 2}]`,
	})
	if err == nil {
		t.Fatal("a 70-character role name was declared")
	}
	for _, w := range []string{
		"invalid stack configuration",
		`flock:agents[1].id: "a-31-character-agent-identifier" would make the IAM role name "a-20-character-flock-a-31-character-agent-identifier-exec-role-xxxxxxx"`,
		`flock:agents[1].id: "a-31-character-agent-identifier" would make the IAM role name "a-20-character-flock-a-31-character-agent-identifier-task-role-xxxxxxx"`,
		"which is 70 characters long; IAM role name: at most 64 characters",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q:\n%v", w, err)
		}
	}
	for _, r := range s.Resources {
		if r.Type != capture.TypeStack {
			t.Errorf("an invalid configuration declared %s %s", r.Type, r.Name)
		}
	}
}
