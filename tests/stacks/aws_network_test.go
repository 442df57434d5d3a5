package stacks_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's invariants (TestAWSStackInvariants, aws_test.go): the network and security groups.

// 1. A VPC with private subnets in two zones, no public IPs, no route out;
// VPC endpoints for ECR, logs and Secrets Manager, and S3 for layers only.
func checkAWSNetwork(t *testing.T, s *capture.Stack) {
	vpc := awsGet(t, s, awsrules.TypeVpc, "flock-vpc")
	if vpc.String("cidrBlock") != "10.220.0.0/16" || !boolean(vpc, "enableDnsSupport") || !boolean(vpc, "enableDnsHostnames") {
		t.Errorf("vpc %v: want 10.220.0.0/16 with DNS support and hostnames", vpc.Inputs)
	}
	subnets := s.ByType(awsrules.TypeSubnet)
	zones := map[string]bool{}
	for _, sub := range subnets {
		if boolean(sub, "mapPublicIpOnLaunch") {
			t.Errorf("%s maps public IPs", sub.Name)
		}
		if p := netip.MustParsePrefix(sub.String("cidrBlock")); !netip.MustParsePrefix("10.220.0.0/16").Contains(p.Addr()) {
			t.Errorf("%s: %s outside the VPC", sub.Name, p)
		}
		zones[sub.String("availabilityZone")] = true
	}
	if len(subnets) != 2 || len(zones) != 2 {
		t.Errorf("%d subnets in zones %v: want private subnets in 2 zones", len(subnets), zones)
	}
	for _, typ := range []string{awsrules.TypeInternetGateway, awsrules.TypeNatGateway, awsrules.TypeEip, awsrules.TypeRoute} {
		if r := s.ByType(typ); len(r) != 0 {
			t.Errorf("endpoints egress declares %s %s: no route to the internet may exist", typ, r[0].Name)
		}
	}
	for _, rt := range s.ByType(awsrules.TypeRouteTable) {
		if len(list(rt, "routes")) != 0 {
			t.Errorf("%s has routes %v", rt.Name, list(rt, "routes"))
		}
	}
	dsg := awsGet(t, s, awsrules.TypeDefaultSG, "flock-default-sg")
	if len(list(dsg, "ingress"))+len(list(dsg, "egress")) != 0 {
		t.Errorf("the VPC's default security group keeps rules")
	}
	want := map[string]bool{}
	for _, svc := range []string{"ecr.api", "ecr.dkr", "logs", "secretsmanager"} {
		want["com.amazonaws."+capture.MockRegion+"."+svc] = true
	}
	for _, ep := range s.ByType(awsrules.TypeVpcEndpoint) {
		svc := ep.String("serviceName")
		switch ep.String("vpcEndpointType") {
		case "Interface":
			if !want[svc] {
				t.Errorf("unexpected interface endpoint %s", svc)
			}
			delete(want, svc)
			if !boolean(ep, "privateDnsEnabled") || len(list(ep, "subnetIds")) != 2 ||
				!reflect.DeepEqual(list(ep, "securityGroupIds"), []any{capture.MockID("flock-endpoints-sg")}) {
				t.Errorf("%s: want private DNS in both private subnets behind the endpoints group: %v", ep.Name, ep.Inputs)
			}
			if p := awsPolicy(t, ep, "policy"); len(p.Statement) != 1 || p.Statement[0].Effect != "Allow" ||
				!reflect.DeepEqual(p.Statement[0].Condition, map[string]map[string]any{"StringEquals": {"aws:PrincipalAccount": capture.MockAccount}}) {
				t.Errorf("%s: policy %+v: want this account's callers only (AWS's default is anyone's)", ep.Name, p)
			}
		case "Gateway":
			if svc != "com.amazonaws."+capture.MockRegion+".s3" || !reflect.DeepEqual(list(ep, "routeTableIds"), []any{capture.MockID("flock-private-rt")}) {
				t.Errorf("%s: want the S3 gateway on the private route table: %v", ep.Name, ep.Inputs)
			}
			p := awsPolicy(t, ep, "policy")
			if len(p.Statement) != 1 || p.Statement[0].Effect != "Allow" ||
				!reflect.DeepEqual(p.Statement[0].Resource, []string{"arn:aws:s3:::prod-" + capture.MockRegion + "-starport-layer-bucket/*"}) {
				t.Errorf("S3 endpoint policy %+v: want ECR's layer bucket only", p)
			}
		default:
			t.Errorf("%s: endpoint type %q", ep.Name, ep.String("vpcEndpointType"))
		}
	}
	if len(want) != 0 {
		t.Errorf("missing interface endpoints %v", want)
	}
}

type awsSGRule struct {
	sg, kind string
	port     int
	peer     string // a group's role, a CIDR list or a prefix list
}

func awsSGRules(t *testing.T, s *capture.Stack) []awsSGRule {
	role := map[string]string{}
	for _, g := range s.ByType(awsrules.TypeSecurityGroup) {
		role[capture.MockID(g.Name)] = strings.TrimSuffix(strings.TrimPrefix(g.Name, "flock-"), "-sg")
		if len(list(g, "ingress"))+len(list(g, "egress")) != 0 {
			t.Errorf("%s has inline rules", g.Name)
		}
	}
	var out []awsSGRule
	for _, r := range s.ByType(awsrules.TypeSecurityGroupRule) {
		if r.String("protocol") != "tcp" || num(r, "fromPort") != num(r, "toPort") {
			t.Errorf("%s: protocol %q ports %v-%v: want one TCP port", r.Name, r.String("protocol"), num(r, "fromPort"), num(r, "toPort"))
		}
		peer := role[r.String("sourceSecurityGroupId")]
		if c := list(r, "cidrBlocks"); len(c) > 0 {
			peer = fmt.Sprint(c)
		}
		if p := list(r, "prefixListIds"); len(p) > 0 {
			peer = fmt.Sprint(p)
		}
		if peer == "" {
			t.Errorf("%s: no peer", r.Name)
		}
		out = append(out, awsSGRule{role[r.String("securityGroupId")], r.String("type"), int(num(r, "fromPort")), peer})
	}
	return out
}

// 2. Agents: no ingress, egress to the bus, EFS and the endpoints only. The
// bus: 4222 from agents and the operator; a cluster's nodes 6222 (routes)
// from and to the bus group itself, from no one else, and no EFS. EFS: 2049
// from the flock's tasks.
func checkAWSSecurityGroups(t *testing.T, s *capture.Stack, b awsBus) {
	rules := awsSGRules(t, s)
	got := map[string][]string{}
	for _, r := range rules {
		k := r.sg + " " + r.kind
		got[k] = append(got[k], fmt.Sprintf("%d %s", r.port, r.peer))
	}
	for k := range got {
		sort.Strings(got[k])
	}
	s3 := "[" + capture.MockPrefixS3 + "]"
	want := map[string][]string{
		"agents egress":     {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints"},
		"operator egress":   {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints", "8222 bus"},
		"bus ingress":       {"4222 agents", "4222 operator", "4222 services", "8222 operator"},
		"bus egress":        {"2049 efs", "443 " + s3, "443 endpoints"},
		"efs ingress":       {"2049 agents", "2049 bus", "2049 operator"},
		"endpoints ingress": {"443 agents", "443 bus", "443 operator", "443 services"},
		// The flock's services: no ingress at all; the bus, and what a task
		// needs to pull its image, read its secret and write its logs.
		"services egress": {"4222 bus", "443 " + s3, "443 endpoints"},
	}
	if b.nodes > 1 {
		want["bus ingress"] = []string{"4222 agents", "4222 operator", "4222 services", "6222 bus", "8222 operator"}
		want["bus egress"] = []string{"443 " + s3, "443 endpoints", "6222 bus"}
		want["efs ingress"] = []string{"2049 agents", "2049 operator"}
	}
	for _, r := range rules {
		if r.port == 6222 && (r.sg != "bus" || r.peer != "bus") {
			t.Errorf("%s %s: the route port with %s; only the bus group may reach it", r.sg, r.kind, r.peer)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("security group rules\n got %v\nwant %v", got, want)
	}
}
