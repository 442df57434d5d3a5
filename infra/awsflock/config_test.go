package awsflock

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// validate validates model (flock: keys as JSON) and flock:aws as the stack does.
func validate(t *testing.T, model, aws string) (Args, []error, error) {
	t.Helper()
	var mc flock.Config
	if err := json.Unmarshal([]byte(model), &mc); err != nil {
		t.Fatal(err)
	}
	mc.Target = string(flock.TargetAWS)
	if mc.AgentCount == nil && len(mc.Agents) == 0 {
		one := 1
		mc.AgentCount = &one
	}
	var c Config
	if err := json.Unmarshal([]byte(aws), &c); err != nil {
		t.Fatal(err)
	}
	m, merr := mc.Validate()
	a, err := c.Validate("aws", m, merr == nil)
	errs := protocol.Problems(err)
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
	// The size alarm: every agent's diskMiB (1024 each) and 1 GiB.
	if a.StorageAlarmBytes != 3<<30 || a.AlarmActions != nil {
		t.Errorf("storage alarm at %d bytes with actions %v, want %d and none", a.StorageAlarmBytes, a.AlarmActions, 3<<30)
	}
	topic := "arn:aws:sns:eu-west-1:123456789012:flock-alarms"
	a, errs, err = validate(t, `{"name": "f", "agentCount": 2}`, `{"imageTag": "v1", "storageAlarmGiB": 50, "alarmActions": ["`+topic+`"]}`)
	if err != nil || len(errs) > 0 {
		t.Fatalf("a valid alarm refused: %v %v", err, errs)
	}
	if a.StorageAlarmBytes != 50<<30 || len(a.AlarmActions) != 1 || a.AlarmActions[0] != topic {
		t.Errorf("storage alarm at %d bytes with actions %v", a.StorageAlarmBytes, a.AlarmActions)
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
		{"small cidr, one bus", `{"agentCount": 106, "bus": {"replicas": 1}}`, `{"cidr":"10.9.0.0/22"}`, "holds 108 task addresses; 106 agents, the bus, the services and the operator need 109"},
		{"one zone", `{}`, `{"availabilityZones":1}`, "flock:aws.availabilityZones: must be between 2 and 6"},
		{"retention", `{}`, `{"logRetentionDays":42}`, "flock:aws.logRetentionDays: must be one of CloudWatch's retention periods"},
		{"operator internet", `{}`, `{"operatorCidrs":["0.0.0.0/0"]}`, "flock:aws.operatorCidrs[0]: must be a private range"},
		{"namespace", `{}`, `{"namespace":"Bus"}`, "flock:aws.namespace: must be a lower-case DNS name"},
		{"image tag", `{}`, `{"imageTag":"a b"}`, "flock:aws.imageTag: must be a docker tag"},
		{"runtime", `{"runtime": "runsc"}`, `{}`, "flock:runtime: must be empty on the aws target"},
		{"uid base", `{"uidBase": 1000}`, `{}`, "flock:uidBase: must be at least 1001 on the aws target"},
		{"too big for fargate", `{"limits": {"cpus": 32}}`, `{}`, "flock:limits: agent agent-1: 32 vCPU and 256 MiB exceed the largest Fargate task"},
		{"cluster store beyond task storage", `{"bus": {"jetStreamMaxMiB": 250000}}`, `{}`, "flock:bus.jetStreamMaxMiB: a clustered bus node keeps its store on Fargate task storage: 250000 MiB and 4096 MiB of headroom need 249 GiB, Fargate gives a task at most 200 GiB: set at most 200704 MiB"},
		{"storage alarm", `{}`, `{"storageAlarmGiB":0}`, "flock:aws.storageAlarmGiB: must be 1 to 8388608 GiB"},
		{"alarm action", `{}`, `{"alarmActions":["arn:aws:sqs:eu-west-1:123456789012:q"]}`, "flock:aws.alarmActions[0]: must be an SNS topic's ARN"},
		{"alarm actions", `{}`, `{"alarmActions":["arn:aws:sns:eu-west-1:123456789012:a","arn:aws:sns:eu-west-1:123456789012:b","arn:aws:sns:eu-west-1:123456789012:c","arn:aws:sns:eu-west-1:123456789012:d","arn:aws:sns:eu-west-1:123456789012:e","arn:aws:sns:eu-west-1:123456789012:f"]}`, "flock:aws.alarmActions: may list at most 5"},
		{"small cidr counts the bus nodes", `{"agentCount": 104}`, `{"cidr":"10.9.0.0/22"}`, "holds 108 task addresses; 104 agents, 3 bus nodes, the services and the operator need 109"},
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

// A single bus keeps its store on EFS: any flock:bus.jetStreamMaxMiB the
// model allows is fine; a cluster node's must fit in Fargate task storage.
func TestClusterStoreSizeOnlyBindsTheCluster(t *testing.T) {
	if _, errs, err := validate(t, `{"bus": {"jetStreamMaxMiB": 300000, "replicas": 1}}`, `{}`); err != nil || len(errs) > 0 {
		t.Fatalf("a single bus with a 300000 MiB store refused: %v %v", err, errs)
	}
	if _, errs, err := validate(t, `{"bus": {"jetStreamMaxMiB": 200704}}`, `{}`); err != nil || len(errs) > 0 {
		t.Fatalf("a cluster with 200704 MiB (+4 GiB = 200 GiB) refused: %v %v", err, errs)
	}
	if _, errs, _ := validate(t, `{"bus": {"jetStreamMaxMiB": 200705}}`, `{}`); len(errs) != 1 {
		t.Fatalf("a cluster with 200705 MiB: %v, want one error", errs)
	}
}

func TestBusStorageGiB(t *testing.T) {
	for _, c := range []struct {
		jsMiB, want int
		fails       bool
	}{
		{4096, 0, false},   // the default: 8 GiB with headroom, in the free 20
		{16384, 0, false},  // exactly 20 GiB
		{16385, 21, false}, // one MiB more: Fargate's smallest paid size
		{65536, 68, false},
		{196608, 196, false},
		{200704, 200, false},
		{200705, 0, true},
	} {
		m := flock.Model{Bus: flock.Bus{Replicas: 3, JetStreamMaxBytes: int64(c.jsMiB) << 20}}
		got, err := BusStorageGiB(m)
		if got != c.want || (err != nil) != c.fails {
			t.Errorf("%d MiB: %d GiB, %v; want %d GiB, failure %v", c.jsMiB, got, err, c.want, c.fails)
		}
		if err != nil && !strings.Contains(err.Error(), "flock:bus.jetStreamMaxMiB") {
			t.Errorf("%d MiB: the error %q does not name flock:bus.jetStreamMaxMiB", c.jsMiB, err)
		}
	}
}

func TestBusURLs(t *testing.T) {
	one := flock.Model{Bus: flock.Bus{Replicas: 1}}
	three := flock.Model{Bus: flock.Bus{Replicas: 3}}
	for _, c := range []struct {
		m            flock.Model
		url, monitor string
	}{
		{one, "nats://bus.f.internal:4222", "http://bus.f.internal:8222"},
		{three, "nats://bus-1.f.internal:4222,nats://bus-2.f.internal:4222,nats://bus-3.f.internal:4222", "http://bus-1.f.internal:8222"},
	} {
		if got := BusURL(c.m, "f.internal"); got != c.url {
			t.Errorf("%d nodes: bus URL %q, want %q", c.m.Bus.Replicas, got, c.url)
		}
		if got := MonitorURL(c.m, "f.internal"); got != c.monitor {
			t.Errorf("%d nodes: monitor URL %q, want %q", c.m.Bus.Replicas, got, c.monitor)
		}
	}
}

// A flock with a gateway: the stack's own VPC with egress "endpoints" (the
// gateway gets its own NAT route); allowHosts are blind tunnels, as on dev;
// one error per key.
func TestConfigGateway(t *testing.T) {
	gw := `"gateway": {"upstreams": {"anthropic": {}}, "allowHosts": ["pypi.org:443"]}`
	_, errs, err := validate(t, `{"agents": [{"id":"agent-1"},{"id":"agent-2","gateway":{"allowHosts":["github.com:443"]}},{"id":"agent-3","gateway":{"allowHosts":["x.org:443"]}}], `+gw+`}`,
		`{"egress":"nat","vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"]}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`flock:aws.vpcId: must be unset with flock:gateway`,
		`flock:aws.egress: must be "endpoints" with flock:gateway`,
	}
	if len(got) != len(want) {
		t.Fatalf("errors:\n%s\nwant one per key:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d: %q, want %q", i, got[i], w)
		}
	}
	// An egress rule may not open the VPC's own range to the gateway.
	_, errs, err = validate(t, `{"agentCount": 2, "gateway": {"upstreams": {"anthropic": {}}, "egress": [
		{"host": "registry.corp.example", "privateRanges": ["10.220.128.0/17"]}, {"host": "pypi.org"}]}}`, `{"cidr": "10.220.0.0/16"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `flock:gateway.egress: rule for host "registry.corp.example": privateRanges 10.220.128.0/17 overlaps the VPC's range 10.220.0.0/16 (flock:aws.cidr)`) {
		t.Errorf("a rule opening the VPC's range: %v", errs)
	}
	a, errs, err := validate(t, `{"agentCount": 2, "gateway": {"upstreams": {"anthropic": {}}}}`, `{"imageTag": "v1"}`)
	if err != nil || len(errs) > 0 || a.Network.Egress != EgressEndpoints || !a.Model.Gateway.Enabled() {
		t.Errorf("a gateway with the defaults refused: %v %v", err, errs)
	}
	_, errs, _ = validate(t, `{"agentCount": 2, "gateway": {"upstreams": {"anthropic": {}}, "limits": {"memoryMiB": 200000}}}`, `{"imageTag": "v1"}`)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "flock:gateway.limits: ") {
		t.Errorf("a gateway no Fargate size holds: %v", errs)
	}
}
