package stacks_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/dnsfirewall"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's DNS Firewall: the rule group it declares, read back from
// the captured resources, answers what the flock looks up and blocks the
// rest; it is associated with the flock's VPC (a new one or the one given),
// fails closed, and is in place before any service starts.
func TestAWSDNSFirewall(t *testing.T) {
	const existing = "vpc-0123456789abcdef0"
	for _, c := range []struct {
		name  string
		stack func(t *testing.T) *capture.Stack
		vpc   string
		hosts []string // the gateway's names the group must allow
	}{
		{"gateway and spans", func(t *testing.T) *capture.Stack {
			return awsGatewayStack(t, capture.Config{"flock:otlp": `{"endpoint": "http://collector.example.internal:4318"}`})
		}, capture.MockID("flock-vpc"), []string{"api.anthropic.com", "collector.example.internal"}},
		{"no gateway", func(t *testing.T) *capture.Stack { return awsStack(t, nil) }, capture.MockID("flock-vpc"), nil},
		{"existing VPC", func(t *testing.T) *capture.Stack {
			return awsStack(t, capture.Config{"flock:aws": `{"vpcId":"` + existing + `","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`})
		}, existing, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.stack(t)
			g, err := capture.DNSFirewall(s)
			if err != nil {
				t.Fatal(err)
			}
			ns := awsGet(t, s, awsrules.TypeNamespace, "flock-namespace").String("name")
			fs := capture.MockID("flock-efs")
			at := func(host string) string { return host + "." + capture.MockRegion + ".amazonaws.com" }
			need := [][]string{
				{"bus-1." + ns}, {"bus-3." + ns}, {"monitor." + ns},
				{at("api.ecr")}, {capture.MockRegistry()}, {at("logs")}, {at("secretsmanager")},
				{at("prod-" + capture.MockRegion + "-starport-layer-bucket.s3"), at("s3-r-w")},
				{at(fs + ".efs")}, {capture.MockRegion + "a." + at(fs+".efs")},
			}
			for _, h := range c.hosts {
				need = append(need, []string{h, "edge." + h + ".cdn.example"})
			}
			for _, chain := range need {
				if v := g.Decide(chain...); !v.Allowed {
					t.Errorf("%v: %v: the flock needs it", chain, v)
				}
			}
			blocked := []string{ns, "x." + ns + ".attacker.example", "data." + at("logs"), at("sts"), "attacker-bucket." + at("s3"),
				"data.api.anthropic.com", "1.0.220.10.in-addr.arpa"}
			r := rand.New(rand.NewPCG(uint64(len(c.name)), 7))
			for i := 0; i < 2000; i++ {
				blocked = append(blocked, fmt.Sprintf("%x.%x.example", r.Uint64(), r.Uint32()), fmt.Sprintf("%x.amazonaws.com", r.Uint64()))
			}
			if c.hosts == nil {
				blocked = append(blocked, "api.anthropic.com")
			}
			for _, name := range blocked {
				if v := g.Decide(name); v.Allowed {
					t.Errorf("%s: %v, want blocked", name, v)
				}
			}

			groups := s.ByType(awsrules.TypeFirewallRuleGroup)
			if len(groups) != 1 {
				t.Fatalf("%d rule groups, want 1", len(groups))
			}
			for _, rule := range s.ByType(awsrules.TypeFirewallRule) {
				if rule.String("firewallRuleGroupId") != capture.MockID(groups[0].Name) {
					t.Errorf("rule %s is in group %q", rule.Name, rule.String("firewallRuleGroupId"))
				}
				if rule.String("action") == dnsfirewall.Block && rule.String("blockResponse") != dnsfirewall.NXDOMAIN {
					t.Errorf("rule %s blocks with %q, want NXDOMAIN", rule.Name, rule.String("blockResponse"))
				}
			}
			assoc := awsGet(t, s, awsrules.TypeFirewallRuleGroupAssoc, "flock-dns-firewall")
			if assoc.String("vpcId") != c.vpc || assoc.String("firewallRuleGroupId") != capture.MockID(groups[0].Name) ||
				assoc.Inputs["priority"].NumberValue() != dnsfirewall.AssociationPriority {
				t.Errorf("association %v: want group %s on %s at priority %d", assoc.Inputs, groups[0].Name, c.vpc, dnsfirewall.AssociationPriority)
			}
			for _, rule := range s.ByType(awsrules.TypeFirewallRule) {
				if !dependsOn(assoc, rule) {
					t.Errorf("the association does not wait for rule %s: an empty group lets every query through", rule.Name)
				}
			}
			cfg := awsGet(t, s, awsrules.TypeFirewallConfig, "flock-dns-firewall")
			if cfg.String("resourceId") != c.vpc || cfg.String("firewallFailOpen") != "DISABLED" {
				t.Errorf("firewall config %v: want %s failing closed", cfg.Inputs, c.vpc)
			}
			for _, svc := range s.ByType(awsrules.TypeService) {
				if !dependsOn(svc, assoc) || !dependsOn(svc, cfg) {
					t.Errorf("service %s starts before the DNS firewall is in place (deps %v)", svc.Name, svc.Deps)
				}
			}
		})
	}
}

// A gateway upstream whose host no domain list can hold fails the preview
// naming its key.
func TestAWSDNSFirewallRefusesAnUnlistableHost(t *testing.T) {
	_, err := runAWSGateway(capture.Config{"flock:gateway": `{"upstreams": {"anthropic": {"url": "https://my_proxy.example"}}}`})
	if err == nil || !strings.Contains(err.Error(), "flock:gateway.upstreams.anthropic.url") || !strings.Contains(err.Error(), "DNS firewall") {
		t.Fatalf("got %v, want an error naming flock:gateway.upstreams.anthropic.url and the DNS firewall", err)
	}
}
