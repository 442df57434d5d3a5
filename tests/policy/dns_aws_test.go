package policy_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The VPC's DNS firewall (stack-aws-dns-firewall), each way it can be left
// open, on the aws fixture: no association, an association on another VPC,
// a group whose last rule is not a catch-all block (or one allowing after
// it), an allowing rule over a top-level domain or everything, and a
// config failing open or missing.
func awsDNSBreakCases() []breakCase {
	const policy = "stack-aws-dns-firewall"
	without := func(typ, name string) func(t testing.TB) []capture.Resource {
		return func(t testing.TB) []capture.Resource { return remove(t, awsStack(3), typ, name) }
	}
	return []breakCase{
		{policy: policy, resource: agent1 + "-svc", stack: "aws", want: "no DNS Firewall rule group is associated with the VPC vpc-1",
			build: without(awsrules.TypeFirewallRuleGroupAssoc, "flock-dns-firewall")},
		{policy: policy, resource: agent1 + "-svc", stack: "aws", want: "no DNS Firewall rule group is associated with the VPC vpc-1",
			build: awsWith(awsrules.TypeFirewallRuleGroupAssoc, "flock-dns-firewall", func(in map[string]any) { in["vpcId"] = "vpc-other" })},
		{policy: policy, resource: agent1 + "-svc", stack: "aws", want: "has no DNS Firewall config of the stack's",
			build: without(awsrules.TypeFirewallConfig, "flock-dns-firewall")},
		{policy: policy, resource: "flock-dns-firewall", stack: "aws", want: `firewallFailOpen is "ENABLED"`,
			build: awsWith(awsrules.TypeFirewallConfig, "flock-dns-firewall", func(in map[string]any) { in["firewallFailOpen"] = "ENABLED" })},
		{policy: policy, resource: "flock-dns-block-the-rest", stack: "aws", want: `is "ALLOW" of [*], not a block of "*"`,
			build: awsWith(awsrules.TypeFirewallRule, "flock-dns-block-the-rest", func(in map[string]any) { in["action"] = "ALLOW" })},
		{policy: policy, resource: "flock-dns-flock-names", stack: "aws", want: `the rule group's last rule (priority 9001) is "ALLOW"`,
			build: awsWith(awsrules.TypeFirewallRule, "flock-dns-flock-names", func(in map[string]any) { in["priority"] = 9001 })},
		{policy: policy, resource: "flock-dns-block-the-rest", stack: "aws", want: `is "BLOCK" of [*.evil.example], not a block of "*"`,
			build: awsWith(awsrules.TypeFirewallDomainList, "flock-dns-block-the-rest", func(in map[string]any) { in["domains"] = []any{"*.evil.example"} })},
		{policy: policy, resource: "flock-dns-flock-names", stack: "aws", want: `it allows "*.com"`,
			build: awsWith(awsrules.TypeFirewallDomainList, "flock-dns-flock-names", func(in map[string]any) {
				in["domains"] = []any{"*.flock.flock.internal", "*.com"}
			})},
		{policy: policy, resource: "flock-dns-firewall", stack: "aws", want: "its rule group has no rules",
			build: func(t testing.TB) []capture.Resource {
				rs := remove(t, awsStack(3), awsrules.TypeFirewallRule, "flock-dns-flock-names")
				return remove(t, rs, awsrules.TypeFirewallRule, "flock-dns-block-the-rest")
			}},
	}
}
