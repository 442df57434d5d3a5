// Package egress is the contract of the gateway's way out: the rules that
// say which hosts an agent may reach, with which methods and paths, and
// which credential the gateway puts in on its behalf. One package parses
// them for both sides: the stacks check the operator's config with Check
// before any resource is declared, and the gateway loads the same rules
// with the same Check and asks Set.Lookup and Rule.Allows of each request.
package egress

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// DefaultPort is a brokered rule's port unless it says another; a plain-HTTP
// rule's is DefaultPlainPort.
const (
	DefaultPort      = 443
	DefaultPlainPort = 80
)

// Rule is one host the gateway lets agents reach. A brokered rule (the
// default) has the gateway terminate the agent's TLS, check each request's
// method and path, and forward it upstream over TLS it verifies itself; a
// tunnel rule (Tunnel) is a blind CONNECT tunnel with no rule inside it.
type Rule struct {
	// Host is an exact name ("github.com") or every name under one
	// ("*.example.com": a.example.com, a.b.example.com, not example.com).
	Host string `json:"host"`
	// Port is the upstream's port; 0: DefaultPort (DefaultPlainPort with
	// PlainHTTP).
	Port int `json:"port,omitempty"`
	// PlainHTTP: the upstream speaks HTTP, not HTTPS (agents ask for
	// http://host/...). A credential is never sent over it.
	PlainHTTP bool `json:"plainHttp,omitempty"`
	// Methods are allowed with every entry of Paths that names no method of
	// its own; empty: GET and HEAD.
	Methods []string `json:"methods,omitempty"`
	// Paths are the path patterns allowed (PathPattern), each optionally
	// after a method of its own ("POST /org/*/git-receive-pack"); empty:
	// every path ("/**").
	Paths []string `json:"paths,omitempty"`
	// Agents may use the rule; empty: every agent of the flock.
	Agents []string `json:"agents,omitempty"`
	// Credential, if set, is put in each request in place of whatever
	// credential the agent sent.
	Credential *Credential `json:"credential,omitempty"`
	// Upgrade names the protocols a request may switch to ("websocket"):
	// after a 101 the connection is blind, so none unless named.
	Upgrade []string `json:"upgrade,omitempty"`
	// Tunnel makes the rule a blind tunnel: CONNECT host:port is spliced to
	// the upstream, nothing inside is read, checked or given a credential.
	// It is a way out: the policy pack flags it.
	Tunnel bool `json:"tunnel,omitempty"`
	// PrivateRanges are ranges (CIDR) of refused addresses that this host
	// may resolve to all the same (a registry inside the operator's
	// network). None may overlap the flock's own pool.
	PrivateRanges []string `json:"privateRanges,omitempty"`
	// Roots are extra PEM certificates the upstream's TLS is verified
	// against besides the system's (a private registry's CA); the policy
	// pack flags a rule that has them.
	Roots string `json:"roots,omitempty"`
	// Preset, in the operator's config, names a preset this rule expands
	// to (Presets); Check expands it, so the gateway never sees one.
	Preset string `json:"preset,omitempty"`

	// RequestsPerMinute bounds each agent's requests under the rule (0: no
	// bound): past it a request is refused with 429 until the minute lets
	// it through. Kept by each gateway in memory.
	RequestsPerMinute int `json:"requestsPerMinute,omitempty"`
	// Budget bounds the bytes each agent moves under the rule, request and
	// response bodies together, per window: kept in the bus's ledger, so a
	// restarted gateway continues from the same totals.
	Budget *Budget `json:"budget,omitempty"`
	// MaxRequestBytes and MaxResponseBytes bound one request's and one
	// response's body (0: no bound): a larger one is refused (413, 502)
	// or, when its length is not said up front, cut where it passes.
	MaxRequestBytes  int64 `json:"maxRequestBytes,omitempty"`
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`

	match []pathRule      // compiled by Check
	nets  []netip.Prefix  // PrivateRanges, parsed
	agent map[string]bool // Agents, nil: every agent
	up    map[string]bool // Upgrade, lower case
}

// Budget is a byte budget per agent and window.
type Budget struct {
	Bytes int64 `json:"bytes"`
	// Window is when the budget starts over: "day" (the default) or
	// "month" (each UTC day or month), or "none" (never).
	Window string `json:"window,omitempty"`
}

// Budget windows, as the ledger names them.
const (
	WindowDay   = "day"
	WindowMonth = "month"
	WindowNone  = "none"
)

// MaxBytes bounds every byte limit a rule names (1 TiB).
const MaxBytes = 1 << 40

// Limited reports whether the rule bounds anything per agent.
func (r *Rule) Limited() bool {
	return r.RequestsPerMinute > 0 || r.Budget != nil || r.MaxRequestBytes > 0 || r.MaxResponseBytes > 0
}

// Credential is what the gateway puts in a brokered request. Its value is
// a secret: the operator's config names the config key holding it
// (Secret); the gateway's config names where it reads it (File or Env).
type Credential struct {
	// Header carries the value after Prefix ("Authorization", "Bearer ");
	// empty with BasicUser: HTTP basic.
	Header string `json:"header,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	// BasicUser, if set, sends HTTP basic with this user and the value as
	// the password (git over HTTPS: "x-access-token" for GitHub).
	BasicUser string `json:"basicUser,omitempty"`
	// Secret is the flock: config key holding the value (a Pulumi secret).
	Secret string `json:"secret,omitempty"`
	// File or Env is where the gateway reads the value.
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// HeaderName is the header the credential goes in.
func (c Credential) HeaderName() string {
	if c.BasicUser != "" && c.Header == "" {
		return "Authorization"
	}
	return c.Header
}

// Wildcard reports whether the rule is for every name under a domain.
func (r *Rule) Wildcard() bool { return strings.HasPrefix(r.Host, "*.") }

// Key is the rule's "host:port" as a CONNECT names it.
func (r *Rule) Key() string { return fmt.Sprintf("%s:%d", r.Host, r.Port) }

// matchesHost reports whether host (lower case, no trailing dot) is the
// rule's.
func (r *Rule) matchesHost(host string) bool {
	if suffix, ok := strings.CutPrefix(r.Host, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == r.Host
}

// ForAgent reports whether agent may use the rule.
func (r *Rule) ForAgent(agent string) bool { return r.agent == nil || r.agent[agent] }

// UpgradeAllowed reports whether a request may switch to protocol.
func (r *Rule) UpgradeAllowed(protocol string) bool { return r.up[strings.ToLower(protocol)] }

// PrivateAllowed is the ranges of refused addresses the rule's host may
// resolve to all the same.
func (r *Rule) PrivateAllowed() []netip.Prefix { return r.nets }

// Allows says whether a request's method and path (as sent: escaped) with
// its raw query may go to the rule's host; when not, why, naming what was
// asked and what would allow it.
func (r *Rule) Allows(method, rawPath, rawQuery string) (bool, string) {
	if why := CanonicalPath(rawPath); why != "" {
		return false, why
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return false, fmt.Sprintf("the query does not parse: %v", err)
	}
	for _, m := range r.match {
		if m.method == method && m.path.Match(rawPath, q) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("no rule for %s:%d allows %s %s", r.Host, r.Port, method, rawPath)
}

// Set is an agent-indexed view of checked rules.
type Set struct{ rules []*Rule }

// NewSet returns the set of checked rules (Check's result).
func NewSet(rules []Rule) *Set {
	s := &Set{}
	for i := range rules {
		s.rules = append(s.rules, &rules[i])
	}
	return s
}

// Rules are the set's rules.
func (s *Set) Rules() []*Rule { return s.rules }

// Lookup returns the rule that agent's request to host:port falls under: an
// exact name before a wildcard, a longer wildcard before a shorter. nil:
// none, and the request is refused.
func (s *Set) Lookup(agent, host string, port int) *Rule {
	host = NormalHost(host)
	var best *Rule
	for _, r := range s.rules {
		if r.Port != port || !r.ForAgent(agent) || !r.matchesHost(host) {
			continue
		}
		if best == nil || specificity(r) > specificity(best) {
			best = r
		}
	}
	return best
}

func specificity(r *Rule) int {
	if r.Wildcard() {
		return len(r.Host)
	}
	return 1 << 20
}

// HostsFor lists the rules agent may use (for its environment and the CLI).
func (s *Set) HostsFor(agent string) []*Rule {
	var out []*Rule
	for _, r := range s.rules {
		if r.ForAgent(agent) {
			out = append(out, r)
		}
	}
	return out
}

// NormalHost is a host name as rules compare it: lower case, no trailing dot.
func NormalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// Suggest is the rule that would allow a refused request (method and path
// as sent): for the operator to review and paste, never applied by itself.
func Suggest(agent, host string, port int, method, rawPath string) Rule {
	p := rawPath
	if i := strings.LastIndex(p, "/"); i > 0 {
		p = p[:i] + "/*"
	}
	r := Rule{Host: host, Paths: []string{method + " " + p}, Agents: []string{agent}}
	if port != DefaultPort {
		r.Port = port
	}
	return r
}

// methodOK: an HTTP method as rules name it, upper-case letters; CONNECT
// is the proxy's own and never a rule's.
func methodOK(m string) bool {
	if m == "" || len(m) > 20 || m == "CONNECT" {
		return false
	}
	return !slices.ContainsFunc([]byte(m), func(c byte) bool { return c < 'A' || c > 'Z' })
}
