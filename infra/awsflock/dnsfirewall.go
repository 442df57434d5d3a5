package awsflock

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/route53"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/dnsfirewall"
)

// dnsNames are what the flock's tasks look up (infra/dnsfirewall), with the
// file systems given (none at config time).
func (d *declarer) dnsNames(fileSystems ...string) dnsfirewall.Names {
	n := dnsfirewall.Names{
		Namespace: d.args.Namespace, Region: d.region, DNSSuffix: d.dnsSuffix, Account: d.account,
		FileSystems: fileSystems,
	}
	for _, up := range d.m.Gateway.Upstreams {
		n.Hosts = append(n.Hosts, up.URL)
	}
	if d.m.OTLP.Endpoint != "" {
		n.Hosts = append(n.Hosts, d.m.OTLP.Endpoint)
	}
	for _, r := range d.m.Gateway.EgressRules {
		n.Egress = append(n.Egress, r.Host)
	}
	return n
}

// dnsFirewall declares the flock's DNS Firewall (dnsfirewall.Flock) on its
// VPC: a domain list and a rule per rule of the group, the group, its
// association, and the VPC's firewall config failing closed. On an existing
// VPC (flock:aws.vpcId) it filters every workload of that VPC.
func (d *declarer) dnsFirewall() error {
	group, err := dnsfirewall.Flock(d.dnsNames())
	if err != nil {
		return err
	}
	rg, err := route53.NewResolverFirewallRuleGroup(d.ctx, d.n("dns-firewall"), &route53.ResolverFirewallRuleGroupArgs{
		Name: pulumi.String(d.n("dns-firewall")), Tags: d.tags("network", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("dns firewall rule group: %w", err)
	}
	var rules []pulumi.Resource
	for _, r := range group {
		domains := pulumi.ToStringArray(r.Domains).ToStringArrayOutput()
		if r.Name == dnsfirewall.RuleAWS {
			// The file system's mount names need its ID, known at apply.
			domains = d.fs.ID().ApplyT(func(id pulumi.ID) []string {
				g, err := dnsfirewall.Flock(d.dnsNames(string(id)))
				if err != nil {
					panic(err) // the same names Flock took above, and an EFS ID
				}
				return g.Rule(dnsfirewall.RuleAWS).Domains
			}).(pulumi.StringArrayOutput)
		}
		list, err := route53.NewResolverFirewallDomainList(d.ctx, d.n("dns", r.Name), &route53.ResolverFirewallDomainListArgs{
			Name: pulumi.String(d.n("dns", r.Name)), Domains: domains, Tags: d.tags("network", ""),
		}, d.parent)
		if err != nil {
			return fmt.Errorf("dns firewall domain list %s: %w", r.Name, err)
		}
		args := &route53.ResolverFirewallRuleArgs{
			Name: pulumi.String(r.Name), Action: pulumi.String(r.Action), Priority: pulumi.Int(r.Priority),
			FirewallRuleGroupId: rg.ID(), FirewallDomainListId: list.ID(),
		}
		if r.Action == dnsfirewall.Block {
			args.BlockResponse = pulumi.String(dnsfirewall.NXDOMAIN)
		} else {
			args.FirewallDomainRedirectionAction = pulumi.String(r.Redirection)
		}
		rule, err := route53.NewResolverFirewallRule(d.ctx, d.n("dns", r.Name), args, d.parent)
		if err != nil {
			return fmt.Errorf("dns firewall rule %s: %w", r.Name, err)
		}
		rules = append(rules, rule)
	}
	// Associated once every rule is in (an empty group lets every query
	// through), and before any task starts (d.ready).
	assoc, err := route53.NewResolverFirewallRuleGroupAssociation(d.ctx, d.n("dns-firewall"), &route53.ResolverFirewallRuleGroupAssociationArgs{
		Name: pulumi.String(d.n("dns-firewall")), FirewallRuleGroupId: rg.ID(), VpcId: d.vpcID,
		Priority: pulumi.Int(dnsfirewall.AssociationPriority), Tags: d.tags("network", ""),
	}, d.parent, pulumi.DependsOn(rules))
	if err != nil {
		return fmt.Errorf("dns firewall association: %w", err)
	}
	cfg, err := route53.NewResolverFirewallConfig(d.ctx, d.n("dns-firewall"), &route53.ResolverFirewallConfigArgs{
		ResourceId: d.vpcID, FirewallFailOpen: pulumi.String(dnsfirewall.FailClosed),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("dns firewall config: %w", err)
	}
	d.ready = append(d.ready, assoc, cfg)
	return nil
}
