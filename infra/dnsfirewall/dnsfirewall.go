// Package dnsfirewall is what the aws stack lets its tasks look up: the one
// Route 53 Resolver DNS Firewall rule group it associates with the flock's
// VPC (Flock), and a model of how the firewall decides a query against such
// a group (Group.Decide), which the stack's tests, the policy pack and the
// Fargate replay check names with.
//
// Why: the VPC's resolver recurses, so without a firewall a program in any
// task can move data out in the names it looks up (each label up to 63
// bytes, answered by whoever runs the zone). With the group, every name a
// task may look up is answered by the flock's own Cloud Map zone or by
// AWS's or the model provider's own zones, and everything else gets
// NXDOMAIN from the firewall without leaving the VPC.
//
// Plain Go with no dependencies, so the policy pack imports it.
package dnsfirewall

import (
	"cmp"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// The API's words (Route 53 Resolver API Reference, CreateFirewallRule).
const (
	Allow = "ALLOW"
	Block = "BLOCK"

	// Inspect (the default): every name of a CNAME or DNAME chain is
	// decided as a query of its own would be, and one refused refuses the
	// query. Trust: an allowing rule that matches a name lets the rest of
	// the chain through uninspected.
	Inspect = "INSPECT_REDIRECTION_DOMAIN"
	Trust   = "TRUST_REDIRECTION_DOMAIN"

	// NXDOMAIN is the answer to a blocked query: "no such host", so a tool
	// fails at once instead of retrying an empty answer.
	NXDOMAIN = "NXDOMAIN"

	// FailClosed is the VPC's firewall config: a query the firewall cannot
	// evaluate (its own failure) is blocked, not let through.
	FailClosed = "DISABLED" // firewall_fail_open = DISABLED
)

// The flock's rules, by name, in the order the firewall takes them.
const (
	RuleFlockNames = "flock-names"    // the Cloud Map namespace
	RuleAWS        = "aws-services"   // the AWS APIs Fargate calls for the tasks
	RuleHosts      = "gateway-hosts"  // the gateway's upstreams and span collector
	RuleEgress     = "egress-hosts"   // the hosts of the gateway's egress rules
	RuleBlockRest  = "block-the-rest" // everything else
	CatchAll       = "*"              // the domain spec of every name
	// BlockPriority is the catch-all's: last, after every allowing rule.
	BlockPriority = 9000
)

// AssociationPriority is where the flock's group sits among the VPC's rule
// groups: 100, the first a user may take (AWS Firewall Manager keeps 1-99
// and 9901-10000). The group decides every query (its last rule blocks
// whatever the others did not allow), so groups after it never see one.
const AssociationPriority = 100

// Rule is one firewall rule: its domain list and what it does on a match.
type Rule struct {
	Name     string
	Priority int // lowest first
	Action   string
	Domains  []string
	// Redirection is Inspect or Trust (allowing rules only).
	Redirection string
}

// Group is a rule group.
type Group []Rule

// Rule is the rule of g named name (nil: none).
func (g Group) Rule(name string) *Rule {
	for i := range g {
		if g[i].Name == name {
			return &g[i]
		}
	}
	return nil
}

// Names are what the flock's tasks look up, and what Fargate looks up for
// them (image pulls, logs, secrets, EFS mounts) through the same resolver.
type Names struct {
	Namespace   string   // the Cloud Map namespace
	Region      string   // us-east-1
	DNSSuffix   string   // the partition's: amazonaws.com, amazonaws.com.cn
	Account     string   // the account the ECR registry is in
	FileSystems []string // EFS file system IDs (empty at preview)
	// Hosts are the gateway's upstreams and span collector, by URL: each
	// allowed by its exact name only (an IP literal needs no lookup).
	Hosts []string
	// Egress are the egress rules' hosts (flock:gateway.egress), as the
	// rules name them: an exact name, or "*." and a suffix.
	Egress []string
}

// AWSNames are the names Fargate looks up for the flock's tasks in the
// VPC's resolver: the ECR API and the account's registry, ECR's layer
// bucket in S3 (by its regional name and the global one), CloudWatch Logs,
// Secrets Manager, and each EFS file system's mount names (the file
// system's, and each zone's under it). Each exact but the zones' EFS names:
// no name carries data a task chooses.
func (n Names) AWSNames() []string {
	at := func(host string) string { return host + "." + n.Region + "." + n.DNSSuffix }
	bucket := "prod-" + n.Region + "-starport-layer-bucket"
	out := []string{
		at("api.ecr"), at(n.Account + ".dkr.ecr"),
		at(bucket + ".s3"), bucket + ".s3." + n.DNSSuffix,
		at("logs"), at("secretsmanager"),
	}
	for _, fs := range n.FileSystems {
		out = append(out, at(fs+".efs"), "*."+at(fs+".efs"))
	}
	return out
}

// EgressNames are n.Egress in lower case, without a final dot, each once
// (an IP literal needs no lookup).
func (n Names) EgressNames() []string {
	var out []string
	for _, h := range n.Egress {
		h = canonical(h)
		if _, err := netip.ParseAddr(h); err == nil || h == "" || slices.Contains(out, h) {
			continue
		}
		out = append(out, h)
	}
	return out
}

// HostNames are the names of n.Hosts that a lookup resolves (not IP
// literals), in order, each once.
func (n Names) HostNames() ([]string, error) {
	var out []string
	for _, raw := range n.Hosts {
		h, err := hostOf(raw)
		if err != nil {
			return nil, err
		}
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, nil
}

func hostOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q: %v", raw, err)
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == "" {
		return "", fmt.Errorf("%q has no host", raw)
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", nil
	}
	if err := CheckDomain(h); err != nil {
		return "", err
	}
	return h, nil
}

// Flock is the flock's rule group: the namespace's names (Cloud Map
// answers them with A and SRV records, so every name of a chain is
// inspected), the AWS names (trusted past the first: S3 and the others
// answer through CNAMEs in AWS's own zones, which no list here can name),
// the gateway's hosts (trusted past the first: a model API's name may be a
// CNAME to its CDN), and a catch-all block last, since the firewall lets
// through a query no rule matches.
func Flock(n Names) (Group, error) {
	if n.Namespace == "" || n.Region == "" || n.DNSSuffix == "" || n.Account == "" {
		return nil, fmt.Errorf("dns firewall: namespace, region, DNS suffix and account are required")
	}
	hosts, err := n.HostNames()
	if err != nil {
		return nil, fmt.Errorf("dns firewall: %w", err)
	}
	g := Group{
		{Name: RuleFlockNames, Priority: 100, Action: Allow, Domains: []string{"*." + n.Namespace}, Redirection: Inspect},
		{Name: RuleAWS, Priority: 200, Action: Allow, Domains: n.AWSNames(), Redirection: Trust},
	}
	if len(hosts) > 0 {
		g = append(g, Rule{Name: RuleHosts, Priority: 300, Action: Allow, Domains: hosts, Redirection: Trust})
	}
	if egress := n.EgressNames(); len(egress) > 0 {
		// Trusted past the first like the upstreams: a registry's name is
		// often a CNAME to its CDN.
		g = append(g, Rule{Name: RuleEgress, Priority: 400, Action: Allow, Domains: egress, Redirection: Trust})
	}
	g = append(g, Rule{Name: RuleBlockRest, Priority: BlockPriority, Action: Block, Domains: []string{CatchAll}})
	for _, r := range g {
		for _, d := range r.Domains {
			if err := CheckDomain(d); err != nil {
				return nil, fmt.Errorf("dns firewall rule %s: %w", r.Name, err)
			}
		}
	}
	return g, nil
}

// CheckDomain is AWS's rule for a domain list entry (Route 53 Resolver API
// Reference, UpdateFirewallDomains, Domains): 1 to 255 characters of A-Z,
// a-z, 0-9, hyphens and dots, optionally after a leading asterisk; and, so
// that it means what it says, "*" alone or "*." and a name, with no empty
// label.
func CheckDomain(d string) error {
	if d == CatchAll {
		return nil
	}
	if len(d) == 0 || len(d) > 255 {
		return fmt.Errorf("domain %q: 1 to 255 characters", d)
	}
	name := strings.TrimPrefix(d, "*.")
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("domain %q holds %q: a domain list entry is letters, digits, hyphens and dots, after an optional leading \"*.\"", d, c)
		}
	}
	if slices.Contains(strings.Split(strings.TrimSuffix(name, "."), "."), "") {
		return fmt.Errorf("domain %q has an empty label", d)
	}
	return nil
}

// canonical is a name as the firewall compares it: without its final dot,
// in lower case.
func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// Matches reports whether the domain list entry spec matches name: "*"
// every name; "*.example.com" every name under example.com but not
// example.com itself; otherwise that name only. Case is ignored.
func Matches(spec, name string) bool {
	spec, name = canonical(spec), canonical(name)
	switch {
	case spec == CatchAll:
		return true
	case strings.HasPrefix(spec, "*."):
		return strings.HasSuffix(name, spec[1:]) && len(name) > len(spec)-1
	default:
		return spec == name
	}
}

// Verdict is how the firewall answers a query.
type Verdict struct {
	Allowed bool
	// Rule decided it ("" when no rule matched any name, which the
	// firewall lets through); Name is the name of the chain it decided on.
	Rule, Name string
}

func (v Verdict) String() string {
	what := "allowed"
	if !v.Allowed {
		what = "blocked"
	}
	if v.Rule == "" {
		return what + ": no rule matches"
	}
	return fmt.Sprintf("%s by rule %s at %s", what, v.Rule, v.Name)
}

// Decide is the firewall's answer to a query for chain[0] whose answer
// passes through the rest of chain (the CNAME or DNAME targets, in order):
// each name is taken to the group's rules lowest priority first and the
// first whose list matches decides it; a block of any name blocks the
// query; an allowing rule that trusts redirection ends the inspection.
func (g Group) Decide(chain ...string) Verdict {
	rules := slices.Clone(g)
	slices.SortStableFunc(rules, func(a, b Rule) int { return cmp.Compare(a.Priority, b.Priority) })
	last := Verdict{Allowed: true}
	for _, name := range chain {
		r := first(rules, name)
		if r == nil {
			continue // no rule matches this name: the firewall lets it through
		}
		last = Verdict{Allowed: r.Action != Block, Rule: r.Name, Name: canonical(name)}
		if !last.Allowed || r.Redirection == Trust {
			return last
		}
	}
	return last
}

func first(rules []Rule, name string) *Rule {
	for i, r := range rules {
		for _, d := range r.Domains {
			if Matches(d, name) {
				return &rules[i]
			}
		}
	}
	return nil
}
