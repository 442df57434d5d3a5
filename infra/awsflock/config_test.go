package awsflock

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// validate validates model (flock: keys as JSON) and flock:aws as the stack does.
func validate(t *testing.T, model, aws string) (Args, []error, error) {
	t.Helper()
	var mc flock.Config
	if err := json.Unmarshal([]byte(model), &mc); err != nil {
		t.Fatal(err)
	}
	mc.Target = string(flock.TargetAWS)
	if mc.AgentCount == nil {
		one := 1
		mc.AgentCount = &one
	}
	var c Config
	if err := json.Unmarshal([]byte(aws), &c); err != nil {
		t.Fatal(err)
	}
	m, merr := mc.Validate()
	a, errs := c.Validate(m, merr == nil)
	return a, errs, merr
}

func TestConfigDefaults(t *testing.T) {
	a, errs, err := validate(t, `{"name": "f", "agentCount": 2}`, `{"imageTag": "v1"}`)
	if err != nil || len(errs) > 0 {
		t.Fatalf("a valid configuration refused: %v %v", err, errs)
	}
	if a.Network.CIDR != DefaultCIDR || a.Network.AZCount != DefaultAZCount || a.Network.Egress != EgressEndpoints ||
		a.LogRetentionDays != DefaultLogRetentionDays || a.Namespace != "f.flock.internal" || a.AgentContext != "agent" || a.ImageTag != "v1" {
		t.Errorf("defaults: %+v", a)
	}
}

// Each rule of flock:aws, and the model's values the aws target refuses,
// name the key and the rule.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, model, aws, want string
	}{
		{"egress", `{}`, `{"egress":"internet"}`, `flock:aws.egress: must be "endpoints"`},
		{"vpc without subnets", `{}`, `{"vpcId":"vpc-0123456789abcdef0","routeTableIds":["rtb-0cccccccccccccccc"]}`, "flock:aws.subnetIds: must list at least two private subnets"},
		{"endpoints without route tables", `{}`, `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"]}`, "flock:aws.routeTableIds: is required"},
		{"duplicate subnet", `{}`, `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0aaaaaaaaaaaaaaaa"],"routeTableIds":["rtb-0cccccccccccccccc"]}`, "flock:aws.subnetIds[1]: duplicates subnet-0aaaaaaaaaaaaaaaa"},
		{"subnets without vpc", `{}`, `{"subnetIds":["subnet-0aaaaaaaaaaaaaaaa"]}`, "flock:aws.subnetIds: subnetIds and routeTableIds name parts of an existing VPC"},
		{"public cidr", `{}`, `{"cidr":"8.8.0.0/16"}`, "flock:aws.cidr: must be a private range"},
		{"small cidr", `{"agentCount": 200}`, `{"cidr":"10.9.0.0/22"}`, "flock:aws.cidr: 10.9.0.0/22 in 2 zones holds"},
		{"one zone", `{}`, `{"availabilityZones":1}`, "flock:aws.availabilityZones: must be between 2 and 6"},
		{"retention", `{}`, `{"logRetentionDays":42}`, "flock:aws.logRetentionDays: must be one of CloudWatch's retention periods"},
		{"operator internet", `{}`, `{"operatorCidrs":["0.0.0.0/0"]}`, "flock:aws.operatorCidrs[0]: must be a private range"},
		{"namespace", `{}`, `{"namespace":"Bus"}`, "flock:aws.namespace: must be a lower-case DNS name"},
		{"image tag", `{}`, `{"imageTag":"a b"}`, "flock:aws.imageTag: must be a docker tag"},
		{"runtime", `{"runtime": "runsc"}`, `{}`, "flock:runtime: must be empty on the aws target"},
		{"uid base", `{"uidBase": 1000}`, `{}`, "flock:uidBase: must be at least 1001 on the aws target"},
		{"too big for fargate", `{"limits": {"cpus": 32}}`, `{}`, "flock:limits: agent agent-1: 32 vCPU and 256 MiB exceed the largest Fargate task"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, err := validate(t, tc.model, tc.aws)
			if err != nil {
				t.Fatalf("the model itself was refused: %v", err)
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if got := strings.Join(msgs, "\n"); !strings.Contains(got, tc.want) {
				t.Fatalf("want an error containing %q, got %q", tc.want, got)
			}
		})
	}
}

// With an invalid model, flock:aws is checked on its own: the rules that
// weigh it against the model must not report the values of a model that
// failed (a spurious "flock:uidBase ... (got 0)").
func TestConfigErrorsWithAnInvalidModel(t *testing.T) {
	_, errs, err := validate(t, `{"agentCount": 0}`, `{"logRetentionDays":42}`)
	if err == nil {
		t.Fatal("the model accepted 0 agents")
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "flock:aws.logRetentionDays:") {
		t.Fatalf("want only the flock:aws.logRetentionDays error, got %v", errs)
	}
}
