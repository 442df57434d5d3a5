package dnsfirewall

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		spec, name string
		want       bool
	}{
		{"*", "anything.example", true},
		{"*", "com", true},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false}, // the wildcard is for names under it only
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "www.example.com.evil", false},
		{"*.Example.COM", "WWW.example.com.", true},
		{"example.com", "example.com.", true},
		{"example.com", "EXAMPLE.com", true},
		{"example.com", "www.example.com", false},
		{"example.com", "example.co", false},
	} {
		if got := Matches(c.spec, c.name); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.spec, c.name, got, c.want)
		}
	}
}

// The lowest priority decides, whatever order the rules are listed in; a
// name no rule matches goes through (why the flock's group ends in a
// catch-all).
func TestDecidePriorityAndTheUnmatched(t *testing.T) {
	g := Group{
		{Name: "allow-all", Priority: 200, Action: Allow, Domains: []string{"*"}},
		{Name: "block-evil", Priority: 100, Action: Block, Domains: []string{"*.evil.example"}},
	}
	if v := g.Decide("data.evil.example"); v.Allowed || v.Rule != "block-evil" {
		t.Errorf("data.evil.example: %v, want blocked by block-evil (priority 100 before 200)", v)
	}
	if v := g.Decide("evil.example"); !v.Allowed || v.Rule != "allow-all" {
		t.Errorf("evil.example: %v, want allowed by allow-all (*.evil.example is not evil.example)", v)
	}
	g[0].Priority = 50
	if v := g.Decide("data.evil.example"); !v.Allowed || v.Rule != "allow-all" {
		t.Errorf("with allow-all at 50: %v, want allowed by it", v)
	}
	open := Group{{Name: "allow-one", Priority: 100, Action: Allow, Domains: []string{"one.example"}}}
	if v := open.Decide("secret-data.attacker.example"); !v.Allowed || v.Rule != "" {
		t.Errorf("a group without a catch-all: %v, want allowed with no rule (the firewall's default)", v)
	}
}

// Every name of a chain is inspected unless the allowing rule trusts
// redirection.
func TestDecideRedirectionChains(t *testing.T) {
	for _, c := range []struct {
		redirection string
		want        bool
		rule, at    string
	}{
		{Inspect, false, RuleBlockRest, "s3-r-w.us-east-1.amazonaws.com"},
		{"", false, RuleBlockRest, "s3-r-w.us-east-1.amazonaws.com"}, // the API's default is to inspect
		{Trust, true, "allow", "bucket.s3.us-east-1.amazonaws.com"},
	} {
		g := Group{
			{Name: "allow", Priority: 100, Action: Allow, Domains: []string{"bucket.s3.us-east-1.amazonaws.com"}, Redirection: c.redirection},
			{Name: RuleBlockRest, Priority: BlockPriority, Action: Block, Domains: []string{CatchAll}},
		}
		v := g.Decide("bucket.s3.us-east-1.amazonaws.com", "s3-r-w.us-east-1.amazonaws.com")
		if v.Allowed != c.want || v.Rule != c.rule || v.Name != c.at {
			t.Errorf("redirection %q: %v, want allowed=%v by %s at %s", c.redirection, v, c.want, c.rule, c.at)
		}
	}
	// Inspected, a chain passes when each of its names is allowed.
	g := Group{
		{Name: "a", Priority: 100, Action: Allow, Domains: []string{"a.example"}, Redirection: Inspect},
		{Name: "b", Priority: 150, Action: Allow, Domains: []string{"*.b.example"}, Redirection: Inspect},
		{Name: RuleBlockRest, Priority: BlockPriority, Action: Block, Domains: []string{CatchAll}},
	}
	if v := g.Decide("a.example", "x.b.example"); !v.Allowed || v.Rule != "b" {
		t.Errorf("a.example -> x.b.example: %v, want allowed, last decided by b", v)
	}
	if v := g.Decide("a.example", "x.b.example", "c.example"); v.Allowed || v.Name != "c.example" {
		t.Errorf("a.example -> x.b.example -> c.example: %v, want blocked at c.example", v)
	}
}

func flockNames() Names {
	return Names{
		Namespace: "fgt.flock.internal", Region: "us-east-1", DNSSuffix: "amazonaws.com", Account: "123456789012",
		FileSystems: []string{"fs-0123abcd"},
		Hosts:       []string{"https://api.anthropic.com", "https://API.OpenAI.com/v1", "http://10.0.0.9:4318", "https://api.anthropic.com:443"},
	}
}

// What the flock needs resolves: its own names, the AWS APIs Fargate calls
// for its tasks (through the CNAMEs S3 answers with), the EFS mount names,
// and the gateway's upstreams (through a CDN's CNAME).
func TestFlockAllowsWhatTheFlockNeeds(t *testing.T) {
	g, err := Flock(flockNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, chain := range [][]string{
		{"bus-1.fgt.flock.internal"}, {"bus-3.fgt.flock.internal."}, {"gateway.fgt.flock.internal"}, {"monitor.fgt.flock.internal"},
		{"api.ecr.us-east-1.amazonaws.com"}, {"123456789012.dkr.ecr.us-east-1.amazonaws.com"},
		{"prod-us-east-1-starport-layer-bucket.s3.us-east-1.amazonaws.com", "s3-r-w.us-east-1.amazonaws.com"},
		{"prod-us-east-1-starport-layer-bucket.s3.amazonaws.com", "s3-1-w.amazonaws.com"},
		{"logs.us-east-1.amazonaws.com"}, {"secretsmanager.us-east-1.amazonaws.com"},
		{"fs-0123abcd.efs.us-east-1.amazonaws.com"}, {"us-east-1a.fs-0123abcd.efs.us-east-1.amazonaws.com"},
		{"api.anthropic.com"}, {"api.openai.com", "api.openai.com.cdn.cloudflare.net"},
	} {
		if v := g.Decide(chain...); !v.Allowed {
			t.Errorf("%v: %v, want allowed", chain, v)
		}
	}
	if r := g.Rule(RuleHosts); r == nil || strings.Join(r.Domains, " ") != "api.anthropic.com api.openai.com" {
		t.Errorf("the hosts rule: %+v, want the two upstream names once each, lower case, no IP literal", r)
	}
}

// What it does not need gets NXDOMAIN: names under the allowed ones that
// carry data, the namespace's apex, other regions and accounts, reverse
// lookups (a public reverse zone is run by the address's owner), and
// random names, each blocked by the catch-all.
func TestFlockBlocksEverythingElse(t *testing.T) {
	g, err := Flock(flockNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, chain := range [][]string{
		{"fgt.flock.internal"}, {"other.flock.internal"}, {"x.fgt.flock.internal.attacker.example"},
		{"bus-1.fgt.flock.internal", "data.attacker.example"}, // inspected: Cloud Map's names lead nowhere else
		{"data.api.anthropic.com"}, {"anthropic.com"}, {"data.logs.us-east-1.amazonaws.com"},
		{"api.ecr.eu-west-1.amazonaws.com"}, {"999999999999.dkr.ecr.us-east-1.amazonaws.com"},
		{"attacker-bucket.s3.us-east-1.amazonaws.com"}, {"fs-99999999.efs.us-east-1.amazonaws.com"},
		{"sts.amazonaws.com"}, {"9.0.0.10.in-addr.arpa"}, {"1.2.0.192.in-addr.arpa"},
	} {
		if v := g.Decide(chain...); v.Allowed || v.Rule != RuleBlockRest {
			t.Errorf("%v: %v, want blocked by %s", chain, v, RuleBlockRest)
		}
	}
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	parents := []string{"attacker.example", "com", "amazonaws.com", "us-east-1.amazonaws.com", "ecr.us-east-1.amazonaws.com",
		"s3.us-east-1.amazonaws.com", "efs.us-east-1.amazonaws.com", "anthropic.com", "flock.internal", "internal"}
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
	for i := 0; i < 20000; i++ {
		var labels []string
		for n := 1 + r.IntN(3); n > 0; n-- {
			b := make([]byte, 1+r.IntN(63))
			for j := range b {
				b[j] = letters[r.IntN(len(letters))]
			}
			labels = append(labels, string(b))
		}
		name := strings.Join(labels, ".") + "." + parents[r.IntN(len(parents))]
		if v := g.Decide(name); v.Allowed {
			t.Fatalf("random name %q (seed %d): %v, want blocked", name, seed, v)
		}
	}
}

func TestFlockRules(t *testing.T) {
	g, err := Flock(flockNames())
	if err != nil {
		t.Fatal(err)
	}
	last := g[len(g)-1]
	for _, r := range g[:len(g)-1] {
		if r.Action != Allow || r.Priority >= last.Priority {
			t.Errorf("rule %s: %s at %d: every rule but the last allows, before it", r.Name, r.Action, r.Priority)
		}
	}
	if last.Name != RuleBlockRest || last.Action != Block || len(last.Domains) != 1 || last.Domains[0] != CatchAll {
		t.Errorf("last rule %+v: want the catch-all block", last)
	}
	if r := g.Rule(RuleFlockNames); r.Redirection != Inspect {
		t.Errorf("the namespace's rule trusts redirection (%s): its names are Cloud Map's, never a chain", r.Redirection)
	}
	n := flockNames()
	n.Hosts = nil
	if g, err := Flock(n); err != nil || g.Rule(RuleHosts) != nil {
		t.Errorf("no gateway: %v, %v: want no hosts rule", g, err)
	}
	n.FileSystems = nil
	g, _ = Flock(n)
	if v := g.Decide("fs-0123abcd.efs.us-east-1.amazonaws.com"); v.Allowed {
		t.Errorf("no file system named: %v", v)
	}
	n = flockNames()
	n.DNSSuffix, n.Region = "amazonaws.com.cn", "cn-north-1"
	g, _ = Flock(n)
	if v := g.Decide("logs.cn-north-1.amazonaws.com.cn"); !v.Allowed {
		t.Errorf("china partition: %v", v)
	}
}

func TestFlockRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		edit func(*Names)
		want string
	}{
		{func(n *Names) { n.Hosts = []string{"https://bad_host.example"} }, `holds '_'`},
		{func(n *Names) { n.Hosts = []string{"https://a..example"} }, "empty label"},
		{func(n *Names) { n.Hosts = []string{"https:///v1"} }, "has no host"},
		{func(n *Names) { n.Hosts = []string{"https://" + strings.Repeat("a.", 130) + "example"} }, "1 to 255 characters"},
		{func(n *Names) { n.Account = "" }, "required"},
		{func(n *Names) { n.Namespace = "ns space.internal" }, `holds ' '`},
	} {
		n := flockNames()
		c.edit(&n)
		if _, err := Flock(n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", n, err, c.want)
		}
	}
}
