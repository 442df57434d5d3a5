package egress

import (
	"net/netip"
	"strings"
	"testing"
)

var testCtx = Context{Key: "flock:gateway.egress", Agents: []string{"agent-1", "agent-2"},
	Pool: []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}}

func mustCheck(t *testing.T, rules ...Rule) *Set {
	t.Helper()
	out, errs := Check(rules, testCtx)
	if len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	return NewSet(out)
}

func TestCheckRefusesBadRulesNamingTheKey(t *testing.T) {
	cred := &Credential{Header: "Authorization", Prefix: "Bearer ", Secret: "githubToken"}
	cases := []struct {
		name string
		rule Rule
		want string // in the error, after the key
	}{
		{"empty host", Rule{}, "[0].host: must not be empty"},
		{"star alone", Rule{Host: "*"}, "[0].host: a wildcard is only *."},
		{"star inside", Rule{Host: "a.*.com"}, "[0].host: a wildcard"},
		{"address", Rule{Host: "10.0.0.1"}, "[0].host: must be a name, not an address"},
		{"public suffix", Rule{Host: "*.com"}, "[0].host: *.com is every name under a top-level domain"},
		{"private public suffix", Rule{Host: "*.github.io"}, "over a public suffix"},
		{"icann two-label suffix", Rule{Host: "*.co.uk"}, "over a public suffix"},
		{"bad label", Rule{Host: "exa mple.com"}, "must be a DNS name"},
		{"port", Rule{Host: "a.example", Port: 70000}, "[0].port: must be 1 to 65535"},
		{"lower-case method", Rule{Host: "a.example", Methods: []string{"get"}}, "[0].methods[0]: must be an HTTP method in upper case"},
		{"connect method", Rule{Host: "a.example", Methods: []string{"CONNECT"}}, "[0].methods[0]"},
		{"pattern without slash", Rule{Host: "a.example", Paths: []string{"org/repo"}}, "[0].paths[0]: must start with '/'"},
		{"dot-dot pattern", Rule{Host: "a.example", Paths: []string{"/a/../b"}}, "[0].paths[0]: has a dot segment"},
		{"double slash pattern", Rule{Host: "a.example", Paths: []string{"/a//b"}}, "empty segment"},
		{"partial double star", Rule{Host: "a.example", Paths: []string{"/a**"}}, "\"**\" must be a whole segment"},
		{"escape in pattern", Rule{Host: "a.example", Paths: []string{"/a%2fb"}}, "[0].paths[0]: has '%'"},
		{"bad own method", Rule{Host: "a.example", Paths: []string{"post /x"}}, "[0].paths[0]: a pattern's own method"},
		{"star-heavy pattern", Rule{Host: "a.example", Paths: []string{"/*a*b*c*d*e"}}, "at most 4 '*'"},
		{"credential on plain http", Rule{Host: "a.example", PlainHTTP: true, Credential: cred}, "[0].credential: is never sent over plain HTTP"},
		{"credential without secret", Rule{Host: "a.example", Credential: &Credential{Header: "Authorization"}}, "[0].credential.secret: must name the secret config key"},
		{"credential in plain text", Rule{Host: "a.example", Credential: &Credential{Header: "Authorization", Secret: "ghp_x", File: "/x"}}, "file and env are the gateway's"},
		{"credential without header", Rule{Host: "a.example", Credential: &Credential{Secret: "tok"}}, "[0].credential: needs header"},
		{"unknown agent", Rule{Host: "a.example", Agents: []string{"agent-9"}}, "[0].agents[0]: \"agent-9\" is not an agent of the flock"},
		{"bad agent", Rule{Host: "a.example", Agents: []string{"Agent 1"}}, "[0].agents[0]: \"Agent 1\" is not an agent of the flock"},
		{"range over the pool", Rule{Host: "a.example", PrivateRanges: []string{"172.30.4.0/24"}}, "[0].privateRanges[0]: 172.30.4.0/24 overlaps the flock's own addresses"},
		{"range over the metadata", Rule{Host: "a.example", PrivateRanges: []string{"169.254.169.254/32"}}, "[0].privateRanges[0]: 169.254.169.254/32 overlaps 169.254.0.0/16, where instance and task metadata"},
		{"a range holding the metadata", Rule{Host: "a.example", PrivateRanges: []string{"128.0.0.0/1"}}, "[0].privateRanges[0]: 128.0.0.0/1 overlaps 169.254.0.0/16"},
		{"the IPv6 metadata", Rule{Host: "a.example", PrivateRanges: []string{"fd00::/8"}}, "[0].privateRanges[0]: fd00::/8 overlaps fd00:ec2::254/128"},
		{"mapped range over the pool", Rule{Host: "a.example", PrivateRanges: []string{"::ffff:172.30.0.0/112"}}, "overlaps the flock's own"},
		{"bad range", Rule{Host: "a.example", PrivateRanges: []string{"10.0.0.1/8"}}, "must be a CIDR range"},
		{"tunnel with paths", Rule{Host: "a.example", Tunnel: true, Paths: []string{"/x"}}, "[0].tunnel: a blind tunnel reads nothing"},
		{"bad roots", Rule{Host: "a.example", Roots: "nope"}, "[0].roots: must be PEM CERTIFICATE blocks"},
		{"unknown preset", Rule{Preset: "gitlab"}, "[0].preset: must be one of github, goproxy, npm, pypi"},
		{"preset with paths", Rule{Preset: "github", Paths: []string{"/x"}}, "[0]: a preset takes only agents, credential and limits"},
		{"negative rate", Rule{Host: "a.example", RequestsPerMinute: -1}, "[0].requestsPerMinute: must be 1 to 1000000"},
		{"huge response bound", Rule{Host: "a.example", MaxResponseBytes: MaxBytes + 1}, "[0].maxResponseBytes: must be 1 to"},
		{"negative request bound", Rule{Host: "a.example", MaxRequestBytes: -5}, "[0].maxRequestBytes: must be 1 to"},
		{"empty budget", Rule{Host: "a.example", Budget: &Budget{}}, "[0].budget.bytes: must be 1 to"},
		{"bad budget window", Rule{Host: "a.example", Budget: &Budget{Bytes: 10, Window: "week"}}, `[0].budget.window: must be "day", "month" or "none" (got "week")`},
		{"tunnel with a budget", Rule{Host: "a.example", Tunnel: true, Budget: &Budget{Bytes: 10}}, "[0].tunnel: a blind tunnel reads nothing inside it: it takes no requestsPerMinute, budget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs := Check([]Rule{c.rule}, testCtx)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			got := strings.Join(all, "\n")
			want := c.want
			if strings.HasPrefix(want, "[") {
				want = "flock:gateway.egress" + want
			}
			if !strings.Contains(got, want) || !strings.HasPrefix(got, "flock:gateway.egress[0]") {
				t.Fatalf("want an error with %q, got:\n%s", c.want, got)
			}
		})
	}
}

func TestCheckRefusesOverlappingRules(t *testing.T) {
	_, errs := Check([]Rule{{Host: "a.example"}, {Host: "A.example."}}, testCtx)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "flock:gateway.egress[1]: a.example:443 is also flock:gateway.egress[0]'s") {
		t.Fatalf("errs = %v", errs)
	}
	// Disjoint agents may each have their own rule for one host.
	if _, errs := Check([]Rule{{Host: "a.example", Agents: []string{"agent-1"}}, {Host: "a.example", Agents: []string{"agent-2"}}}, testCtx); errs != nil {
		t.Fatalf("disjoint agents: %v", errs)
	}
}

func TestGitFetchRuleAllowsFetchAndNotPush(t *testing.T) {
	s := mustCheck(t, Rule{Host: "git.example", Paths: []string{
		"GET /org/*.git/info/refs?service=git-upload-pack",
		"POST /org/*.git/git-upload-pack",
		"POST /org/allowed.git/git-receive-pack",
		"GET /org/allowed.git/info/refs?service=git-receive-pack",
	}})
	r := s.Lookup("agent-1", "GIT.example.", 443)
	if r == nil {
		t.Fatal("no rule for git.example:443")
	}
	for _, c := range []struct {
		method, path, query string
		ok                  bool
	}{
		{"GET", "/org/repo.git/info/refs", "service=git-upload-pack", true},
		{"POST", "/org/repo.git/git-upload-pack", "", true},
		{"GET", "/org/repo.git/info/refs", "service=git-receive-pack", false},
		{"GET", "/org/repo.git/info/refs", "service=git-upload-pack&service=git-receive-pack", false},
		{"GET", "/org/repo.git/info/refs", "", false},
		{"POST", "/org/repo.git/git-receive-pack", "", false},
		{"POST", "/org/allowed.git/git-receive-pack", "", true},
		{"GET", "/org/allowed.git/info/refs", "service=git-receive-pack", true},
		{"post", "/org/repo.git/git-upload-pack", "", false},
		{"POST", "/org/sub/repo.git/git-upload-pack", "", false},
		{"POST", "/org/repo.git/git-upload-pack/", "", false},
		{"POST", "/org/x/../allowed.git/git-receive-pack", "", false},
		{"POST", "/org/%2e%2e/allowed.git/git-receive-pack", "", false},
		{"POST", "/org/allowed.git%2fgit-receive-pack", "", false},
		{"POST", "/org/allowed.git/git-receive-pack;x", "", false},
		{"POST", "//org/allowed.git/git-receive-pack", "", false},
		{"POST", "/org//allowed.git/git-receive-pack", "", false},
		{"POST", "/org/allowed.git\\git-receive-pack", "", false},
	} {
		ok, why := r.Allows(c.method, c.path, c.query)
		if ok != c.ok {
			t.Errorf("%s %s?%s: allowed %v (%s), want %v", c.method, c.path, c.query, ok, why, c.ok)
		}
		if !ok && why == "" {
			t.Errorf("%s %s: refused with no reason", c.method, c.path)
		}
	}
}

func TestLookupPrefersTheMostSpecificRuleAndScopesAgents(t *testing.T) {
	s := mustCheck(t,
		Rule{Host: "*.example.org"},
		Rule{Host: "*.api.example.org", Methods: []string{"POST"}},
		Rule{Host: "v1.api.example.org", Methods: []string{"PUT"}, Agents: []string{"agent-2"}},
		Rule{Host: "plain.example.org", PlainHTTP: true},
	)
	for _, c := range []struct {
		agent, host string
		port        int
		want        string
	}{
		{"agent-1", "x.example.org", 443, "*.example.org"},
		{"agent-1", "example.org", 443, ""},
		{"agent-1", "evilexample.org", 443, ""},
		{"agent-1", "a.b.api.example.org", 443, "*.api.example.org"},
		{"agent-1", "v1.api.example.org", 443, "*.api.example.org"},
		{"agent-2", "v1.api.example.org", 443, "v1.api.example.org"},
		{"agent-1", "x.example.org", 8443, ""},
		{"agent-1", "plain.example.org", 80, "plain.example.org"},
	} {
		r := s.Lookup(c.agent, c.host, c.port)
		got := ""
		if r != nil {
			got = r.Host
		}
		if got != c.want {
			t.Errorf("%s → %s:%d: rule %q, want %q", c.agent, c.host, c.port, got, c.want)
		}
	}
}

func TestPresetsExpandToPlainRules(t *testing.T) {
	out, errs := Check([]Rule{{Preset: "github", Agents: []string{"agent-1"},
		Credential: &Credential{BasicUser: "x-access-token", Secret: "githubToken"}}}, testCtx)
	if errs != nil {
		t.Fatal(errs)
	}
	if len(out) != len(Presets["github"]) || out[0].Host != "github.com" || out[0].Credential == nil || out[1].Credential != nil {
		t.Fatalf("expanded = %+v", out)
	}
	s := NewSet(out)
	if s.Lookup("agent-2", "github.com", 443) != nil {
		t.Error("agent-2 got agent-1's preset")
	}
	gh := s.Lookup("agent-1", "github.com", 443)
	if ok, _ := gh.Allows("POST", "/org/repo.git/git-receive-pack", ""); ok {
		t.Error("the github preset allows a push")
	}
	if ok, why := gh.Allows("POST", "/org/repo.git/git-upload-pack", ""); !ok {
		t.Errorf("the github preset refuses a fetch: %s", why)
	}
	if ok, _ := s.Lookup("agent-1", "objects.githubusercontent.com", 443).Allows("PUT", "/x", ""); ok {
		t.Error("a preset allows PUT")
	}
	for _, name := range PresetNames() {
		if _, errs := Check([]Rule{{Preset: name}}, testCtx); errs != nil {
			t.Errorf("preset %s does not pass its own check: %v", name, errs)
		}
	}
}

func TestPatternMatching(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		ok        bool
	}{
		{"/**", "/", true},
		{"/**", "/a/b/c", true},
		{"/a/**", "/a", true},
		{"/a/**/z", "/a/z", true},
		{"/a/**/z", "/a/b/c/z", true},
		{"/a/**/z", "/a/b/c/y", false},
		{"/*", "/", false},
		{"/*.tgz", "/x.tgz", true},
		{"/*.tgz", "/x.tgz/y", false},
		{"/v*/x", "/v2/x", true},
		{"/v*/x", "/w2/x", false},
		{"/a", "/ab", false},
		{"/simple/**", "/simple/pkg/", true},
		{"/simple/*", "/simple/pkg/", false},
		{"/simple/*/", "/simple/pkg/", true},
		{"/simple/*/", "/simple//", false},
		{"/a/*", "/a/", false},
	} {
		p, err := parsePattern(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(c.path, nil); got != c.ok {
			t.Errorf("%s ~ %s = %v, want %v", c.pat, c.path, got, c.ok)
		}
	}
}

func TestSuggestIsARuleThatWouldAllowTheRefusal(t *testing.T) {
	r := Suggest("agent-1", "git.example", 443, "POST", "/org/repo.git/git-receive-pack")
	s := mustCheck(t, r)
	if ok, why := s.Lookup("agent-1", "git.example", 443).Allows("POST", "/org/repo.git/git-receive-pack", ""); !ok {
		t.Fatalf("the suggestion %+v does not allow what was refused: %s", r, why)
	}
	if s.Lookup("agent-2", "git.example", 443) != nil {
		t.Fatal("the suggestion is wider than the refused agent")
	}
}

func FuzzAllowsNeverPanics(f *testing.F) {
	f.Add("GET", "/a/b", "x=1")
	f.Add("POST", "/%zz", "%")
	r := Rule{Host: "a.example", Paths: []string{"/**/x/*.y?k=v", "/a/**"}}
	rules, errs := Check([]Rule{r}, testCtx)
	if errs != nil {
		f.Fatal(errs)
	}
	rule := &rules[0]
	f.Fuzz(func(t *testing.T, m, p, q string) {
		ok, _ := rule.Allows(m, p, q)
		if ok && CanonicalPath(p) != "" {
			t.Fatalf("allowed a path refused whatever the rules: %q", p)
		}
	})
}

// A preset's limits reach every host it expands to; a budget's window
// defaults to a day.
func TestPresetLimitsAndBudgetWindow(t *testing.T) {
	rs, errs := Check([]Rule{{Preset: "pypi", RequestsPerMinute: 600, MaxResponseBytes: 1 << 30, Budget: &Budget{Bytes: 5 << 30}}}, testCtx)
	if len(errs) > 0 || len(rs) < 2 {
		t.Fatalf("%v %v", rs, errs)
	}
	for _, r := range rs {
		if r.RequestsPerMinute != 600 || r.MaxResponseBytes != 1<<30 || r.Budget == nil || r.Budget.Bytes != 5<<30 || r.Budget.Window != WindowDay {
			t.Errorf("%s: limits %d %d %+v", r.Host, r.RequestsPerMinute, r.MaxResponseBytes, r.Budget)
		}
	}
	if rs[0].Budget == rs[1].Budget {
		t.Error("the expanded rules share one budget value")
	}
}
