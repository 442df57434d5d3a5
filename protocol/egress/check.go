package egress

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Context is what Check knows of the flock.
type Context struct {
	// Key is the config key the rules come from, for errors
	// ("flock:gateway.egress"): rule i is Key[i].
	Key string
	// Keys, if set, is each rule's own key in place of Key[i] (rules made
	// from other settings, named after the setting).
	Keys []string
	// Agents are the flock's agent IDs; a rule naming another is refused
	// (and so is every ID that is not an agent's).
	Agents []string
	// Pool is the flock's own address space: no rule's PrivateRanges may
	// overlap it.
	Pool []netip.Prefix
	// Gateway: the rules are the gateway's (credentials name File or Env,
	// presets are already expanded); else the operator's (credentials name
	// Secret).
	Gateway bool
}

// metadataRanges are where a cloud host's metadata and credentials answer
// (EC2's IMDS at 169.254.169.254 and fd00:ec2::254, ECS task metadata at
// 169.254.170.2, every link-local address): no rule may name them.
var metadataRanges = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("fd00:ec2::254/128"),
}

// Limits on one rule, so that matching stays cheap whatever is written.
const (
	MaxRules        = 256
	MaxPathsPerRule = 64
	maxStarsPerSeg  = 4
	maxDoubleStars  = 2
)

var (
	labelPattern  = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)
	secretPattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]{0,63}$`)
	headerPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	tokenPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]{0,31}$`)
)

// Check validates rules and expands presets, returning the rules the
// gateway enforces and every problem, each naming its key and the rule.
func Check(rules []Rule, c Context) ([]Rule, []error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if len(rules) > MaxRules {
		bad(c.Key, "at most %d rules (got %d)", MaxRules, len(rules))
		return nil, errs
	}
	var out []Rule
	var keys []string // the config key of each rule in out
	for i, r := range rules {
		key := fmt.Sprintf("%s[%d]", c.Key, i)
		if i < len(c.Keys) {
			key = c.Keys[i]
		}
		if r.Preset == "" {
			out = append(out, r)
			keys = append(keys, key)
			continue
		}
		if c.Gateway {
			bad(key+".preset", "the gateway's rules are expanded: presets are the operator's config's")
			continue
		}
		if _, ok := Presets[r.Preset]; !ok {
			bad(key+".preset", "must be one of %s (got %q)", strings.Join(PresetNames(), ", "), r.Preset)
			continue
		}
		if r.Host != "" || r.Port != 0 || r.PlainHTTP || r.Methods != nil || r.Paths != nil || r.Upgrade != nil || r.Tunnel || r.PrivateRanges != nil || r.Roots != "" {
			bad(key, "a preset takes only agents, credential and limits: its hosts, methods and paths are fixed (write a rule of your own for more)")
			continue
		}
		for _, e := range expand(r) {
			out = append(out, e)
			keys = append(keys, key+".preset("+e.Host+")")
		}
	}
	known := map[string]bool{}
	for _, a := range c.Agents {
		known[a] = true
	}
	for i := range out {
		errs = append(errs, checkRule(&out[i], keys[i], c, known)...)
	}
	errs = append(errs, overlaps(out, keys)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func checkRule(r *Rule, key string, c Context, known map[string]bool) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s%s: "+format, append([]any{key, field}, args...)...))
	}
	r.Host = NormalHost(r.Host)
	if why := checkHost(r.Host); why != "" {
		bad(".host", "%s", why)
	}
	if r.Port == 0 {
		r.Port = DefaultPort
		if r.PlainHTTP {
			r.Port = DefaultPlainPort
		}
	}
	if r.Port < 1 || r.Port > 65535 {
		bad(".port", "must be 1 to 65535 (got %d)", r.Port)
	}
	errs = append(errs, checkLimits(r, key)...)
	if r.Tunnel {
		if r.Methods != nil || r.Paths != nil || r.Credential != nil || r.Upgrade != nil || r.PlainHTTP {
			bad(".tunnel", "a blind tunnel reads nothing inside it: it takes no methods, paths, credential, upgrade or plainHttp")
		}
		if r.Limited() {
			bad(".tunnel", "a blind tunnel reads nothing inside it: it takes no requestsPerMinute, budget or size bounds (write a brokered rule to bound it)")
		}
	} else {
		methods := r.Methods
		if methods == nil {
			methods = []string{"GET", "HEAD"}
		}
		for j, m := range methods {
			if !methodOK(m) {
				bad(fmt.Sprintf(".methods[%d]", j), "must be an HTTP method in upper case other than CONNECT, such as GET or POST (got %q)", m)
			}
		}
		paths := r.Paths
		if paths == nil {
			paths = []string{"/**"}
		}
		if len(paths) > MaxPathsPerRule {
			bad(".paths", "at most %d patterns (got %d)", MaxPathsPerRule, len(paths))
			paths = nil
		}
		r.match = nil
		for j, p := range paths {
			ms := methods
			if m, rest, ok := strings.Cut(p, " "); ok && !strings.HasPrefix(p, "/") {
				if !methodOK(m) {
					bad(fmt.Sprintf(".paths[%d]", j), "a pattern's own method must be an HTTP method in upper case other than CONNECT (got %q)", m)
					continue
				}
				ms, p = []string{m}, rest
			}
			pat, err := parsePattern(p)
			if err == nil {
				err = patternCost(pat)
			}
			if err != nil {
				bad(fmt.Sprintf(".paths[%d]", j), "%v; a pattern is %s", err, PathPattern)
				continue
			}
			for _, m := range ms {
				r.match = append(r.match, pathRule{method: m, path: pat})
			}
		}
	}
	if r.Credential != nil {
		errs = append(errs, checkCredential(*r.Credential, key+".credential", c.Gateway)...)
		if r.PlainHTTP {
			bad(".credential", "is never sent over plain HTTP: the rule has plainHttp, so anyone on the path would read it")
		}
	}
	r.agent = nil
	if r.Agents != nil {
		if len(r.Agents) == 0 {
			bad(".agents", "must name at least one agent, or be left out for every agent")
		}
		r.agent = map[string]bool{}
		for j, a := range r.Agents {
			if !known[a] {
				bad(fmt.Sprintf(".agents[%d]", j), "%q is not an agent of the flock", a)
			}
			r.agent[a] = true
		}
	}
	r.up = nil
	for j, u := range r.Upgrade {
		if !tokenPattern.MatchString(strings.ToLower(u)) {
			bad(fmt.Sprintf(".upgrade[%d]", j), "must be a protocol name such as websocket (got %q)", u)
			continue
		}
		if r.up == nil {
			r.up = map[string]bool{}
		}
		r.up[strings.ToLower(u)] = true
	}
	r.nets = nil
	for j, s := range r.PrivateRanges {
		p, err := netip.ParsePrefix(s)
		if err != nil || p != p.Masked() {
			bad(fmt.Sprintf(".privateRanges[%d]", j), "must be a CIDR range such as 10.20.0.0/16 (got %q)", s)
			continue
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-unmapBits(p.Addr()))
		for _, own := range c.Pool {
			if own.Overlaps(p) {
				bad(fmt.Sprintf(".privateRanges[%d]", j), "%s overlaps the flock's own addresses %s: agents and the bus are never a way out", p, own)
			}
		}
		for _, md := range metadataRanges {
			if md.Overlaps(p) {
				bad(fmt.Sprintf(".privateRanges[%d]", j), "%s overlaps %s, where instance and task metadata and their credentials answer: never a way out", p, md)
			}
		}
		r.nets = append(r.nets, p)
	}
	if r.Roots != "" {
		if err := checkRoots(r.Roots); err != nil {
			bad(".roots", "%v", err)
		}
		if r.Tunnel {
			bad(".roots", "a blind tunnel's TLS is the agent's: the gateway verifies nothing there")
		}
	}
	return errs
}

func unmapBits(a netip.Addr) int {
	if a.Is4In6() {
		return 96
	}
	return 0
}

// checkHost says what is wrong with a rule's host ("" when nothing).
func checkHost(h string) string {
	name, wild := strings.CutPrefix(h, "*.")
	switch {
	case h == "":
		return "must not be empty: name a host such as github.com, or every name under one as *.example.com"
	case h == "*" || strings.Contains(name, "*"):
		return fmt.Sprintf("a wildcard is only *. before a name, such as *.example.com (got %q): '*' alone would be every host", h)
	case len(name) > 253:
		return fmt.Sprintf("is over 253 characters (got %d)", len(name))
	}
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return fmt.Sprintf("must be a name, not an address (got %q): the gateway checks the addresses a name resolves to", h)
	}
	for _, l := range strings.Split(name, ".") {
		if !labelPattern.MatchString(l) {
			return fmt.Sprintf("must be a DNS name, labels of letters, digits, '-' and '_' (got %q)", h)
		}
	}
	if wild {
		if !strings.Contains(name, ".") {
			return fmt.Sprintf("*.%s is every name under a top-level domain: name the domain you mean", name)
		}
		if ps, _ := publicsuffix.PublicSuffix(name); ps == name {
			return fmt.Sprintf("*.%s is over a public suffix (%s), where anyone can register names: name the hosts you mean", name, ps)
		}
	}
	return ""
}

func checkCredential(c Credential, key string, gateway bool) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s%s: "+format, append([]any{key, field}, args...)...))
	}
	switch {
	case c.Header == "" && c.BasicUser == "":
		bad("", "needs header (with an optional prefix, such as Authorization and \"Bearer \") or basicUser (HTTP basic, for git)")
	case c.Header != "" && !headerPattern.MatchString(c.Header):
		bad(".header", "must be a header name such as Authorization (got %q)", c.Header)
	case c.BasicUser != "" && c.Header != "" && !strings.EqualFold(c.Header, "Authorization"):
		bad(".basicUser", "HTTP basic goes in Authorization: leave header out")
	}
	if strings.ContainsAny(c.Prefix, "\r\n") {
		bad(".prefix", "must not contain CR or LF")
	}
	if c.BasicUser != "" && c.Prefix != "" {
		bad(".prefix", "HTTP basic has no prefix")
	}
	if strings.ContainsAny(c.BasicUser, ":\r\n") {
		bad(".basicUser", "must not contain ':', CR or LF")
	}
	if gateway {
		if (c.File == "") == (c.Env == "") {
			bad("", "the gateway reads a credential from exactly one of file and env")
		}
	} else {
		if !secretPattern.MatchString(c.Secret) {
			bad(".secret", "must name the secret config key holding the value, letters and digits, such as githubToken (set it with pulumi config set --secret flock:githubToken ...) (got %q)", c.Secret)
		}
		if c.File != "" || c.Env != "" {
			bad("", "file and env are the gateway's: name the value's config key in secret")
		}
	}
	return errs
}

func checkRoots(s string) error {
	rest := []byte(s)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("must hold only PEM CERTIFICATE blocks (got %s)", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("a certificate does not parse: %v", err)
		}
		if !c.IsCA {
			return errors.New("a root must be a CA certificate")
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return errors.New("must be PEM CERTIFICATE blocks and nothing else")
	}
	return nil
}

func patternCost(p pattern) error {
	doubles := 0
	for _, s := range p.segs {
		if s == "**" {
			doubles++
		} else if strings.Count(s, "*") > maxStarsPerSeg {
			return fmt.Errorf("at most %d '*' in a segment", maxStarsPerSeg)
		}
	}
	if doubles > maxDoubleStars {
		return fmt.Errorf("at most %d \"**\" segments", maxDoubleStars)
	}
	return nil
}

// overlaps refuses two rules one request could fall under equally: the
// same host and port for a common agent (a wildcard and an exact name may
// overlap: the exact one wins).
func overlaps(rules []Rule, keys []string) []error {
	var errs []error
	for i := range rules {
		for j := range i {
			a, b := &rules[i], &rules[j]
			if a.Host != b.Host || a.Port != b.Port {
				continue
			}
			if a.Agents == nil || b.Agents == nil || slices.ContainsFunc(a.Agents, func(x string) bool { return slices.Contains(b.Agents, x) }) {
				errs = append(errs, fmt.Errorf("%s: %s is also %s's, for a common agent: give each host:port one rule per agent (list the methods and paths it allows together)", keys[i], a.Key(), keys[j]))
			}
		}
	}
	return errs
}
