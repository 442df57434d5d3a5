package rules

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/dnsfirewall"
)

// stackAWSDNSFirewall: an aws flock's VPC resolves only what a rule allows.
// The VPC's resolver recurses, so without a firewall a task moves data out
// in the names it looks up. Required: a DNS Firewall rule group associated
// with each VPC the flock's security groups are in, whose last rule blocks
// "*" (the firewall lets through what no rule matches), whose allowing
// rules name no "*" and no "*." over a single label (a top-level domain:
// anyone's zone), and the VPC's firewall config failing closed.
//
// Links are by ID; an ID the engine knows only at apply is taken to be the
// link the stack means (a preview of a new stack knows none).
func stackAWSDNSFirewall(rs []Resource) []Finding {
	svcs := byTypeSorted(rs, awsrules.TypeService)
	if len(svcs) == 0 {
		return nil
	}
	const fix = "associate a Route 53 Resolver DNS Firewall rule group with the flock's VPC whose rules allow named domains only and whose last rule (the greatest priority number) blocks \"*\", and give the VPC a firewall config with firewallFailOpen DISABLED (infra/dnsfirewall)"
	assocs := byTypeSorted(rs, awsrules.TypeFirewallRuleGroupAssoc)
	configs := byTypeSorted(rs, awsrules.TypeFirewallConfig)
	var out []Finding

	// Each VPC the flock's groups are in has an association and fails closed.
	var vpcs []string
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		if v := sg.get("vpcId"); !isUnknown(v) && str(v) != "" && !slices.Contains(vpcs, str(v)) {
			vpcs = append(vpcs, str(v))
		}
	}
	if len(vpcs) == 0 {
		vpcs = []string{""} // unknown at preview: any association or config stands for it
	}
	for _, vpc := range vpcs {
		where := "the flock's VPC"
		if vpc != "" {
			where = "the VPC " + vpc
		}
		if !slices.ContainsFunc(assocs, func(a Resource) bool { return linked(a.get("vpcId"), vpc) }) {
			out = append(out, svcs[0].finding(fix, "no DNS Firewall rule group is associated with %s: its resolver answers any name, so a task can move data out in the names it looks up", where))
		}
		i := slices.IndexFunc(configs, func(c Resource) bool { return linked(c.get("resourceId"), vpc) })
		if i < 0 {
			out = append(out, svcs[0].finding(fix, "%s has no DNS Firewall config of the stack's: whether a query the firewall fails to evaluate is let through is left to the account", where))
		} else if v := configs[i].get("firewallFailOpen"); !isUnknown(v) && str(v) != dnsfirewall.FailClosed {
			out = append(out, configs[i].finding(fix, "firewallFailOpen is %q: a query the firewall fails to evaluate would be let through, and with it any name", str(v)))
		}
	}

	// Each associated group ends in a catch-all block and allows named domains only.
	for _, a := range assocs {
		var rules []Resource
		for _, r := range byTypeSorted(rs, awsrules.TypeFirewallRule) {
			if linked(r.get("firewallRuleGroupId"), str(a.get("firewallRuleGroupId"))) || isUnknown(a.get("firewallRuleGroupId")) {
				rules = append(rules, r)
			}
		}
		if len(rules) == 0 {
			out = append(out, a.finding(fix, "its rule group has no rules: the firewall lets every query through"))
			continue
		}
		prio := func(r Resource) float64 { n, _ := number(r.get("priority")); return n }
		slices.SortStableFunc(rules, func(x, y Resource) int { return cmp.Compare(prio(x), prio(y)) })
		last := rules[len(rules)-1]
		if domains, known := domainsOf(rs, last); str(last.get("action")) != dnsfirewall.Block || known && !slices.Contains(domains, dnsfirewall.CatchAll) {
			out = append(out, last.finding(fix, "the rule group's last rule (priority %v) is %q of %v, not a block of \"*\": a query no rule matches is let through", prio(last), str(last.get("action")), domains))
		}
		for _, r := range rules {
			if str(r.get("action")) == dnsfirewall.Block {
				continue
			}
			domains, _ := domainsOf(rs, r)
			for _, d := range domains {
				if d == dnsfirewall.CatchAll || strings.HasPrefix(d, "*.") && !strings.Contains(strings.TrimSuffix(d[2:], "."), ".") {
					out = append(out, r.finding(fix, "it allows %q: names in zones anyone may run, so a task could move data out in the names it looks up", d))
				}
			}
		}
	}
	return out
}

// domainsOf are the domains of a firewall rule's domain list (known false
// when the list or its domains are known only at apply).
func domainsOf(rs []Resource, rule Resource) (domains []string, known bool) {
	id := rule.get("firewallDomainListId")
	if isUnknown(id) {
		return nil, false
	}
	known = true
	for _, l := range byTypeSorted(rs, awsrules.TypeFirewallDomainList) {
		if resourceID(l) == "" || str(id) != resourceID(l) {
			continue
		}
		v := l.get("domains")
		if isUnknown(v) {
			known = false
		}
		for _, d := range list(v) {
			if isUnknown(d) {
				known = false
				continue
			}
			domains = append(domains, str(d))
		}
	}
	return domains, known
}

// linked reports whether a reference v names id: equal, or not known yet
// (unknown, or id "" standing for an unknown one).
func linked(v any, id string) bool {
	return isUnknown(v) || id == "" || str(v) == id
}
