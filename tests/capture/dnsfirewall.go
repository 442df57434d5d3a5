package capture

import (
	"fmt"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/dnsfirewall"
)

// DNSFirewall is the DNS Firewall rule group a captured aws stack declares,
// read back from its resources (each rule with the domains of the list it
// names by ID), so a test checks names against what was declared, not
// against what the component meant to declare.
func DNSFirewall(s *Stack) (dnsfirewall.Group, error) {
	lists := map[string][]string{}
	for _, l := range s.ByType(awsrules.TypeFirewallDomainList) {
		var domains []string
		for _, d := range l.Inputs["domains"].ArrayValue() {
			if !d.IsString() {
				return nil, fmt.Errorf("domain list %s: domain %v is not a known string", l.Name, d)
			}
			domains = append(domains, d.StringValue())
		}
		lists[MockID(l.Name)] = domains
	}
	var g dnsfirewall.Group
	for _, r := range s.ByType(awsrules.TypeFirewallRule) {
		domains, ok := lists[r.String("firewallDomainListId")]
		if !ok {
			return nil, fmt.Errorf("rule %s names domain list %q, which the stack does not declare", r.Name, r.String("firewallDomainListId"))
		}
		p := r.Inputs["priority"]
		if !p.IsNumber() {
			return nil, fmt.Errorf("rule %s: priority %v", r.Name, p)
		}
		g = append(g, dnsfirewall.Rule{Name: r.String("name"), Priority: int(p.NumberValue()), Action: r.String("action"),
			Domains: domains, Redirection: r.String("firewallDomainRedirectionAction")})
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("the stack declares no DNS Firewall rule")
	}
	return g, nil
}
