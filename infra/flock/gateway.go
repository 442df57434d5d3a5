package flock

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

// ModelGateway is the model gateway: the one container (dev) or service (aws)
// with a route out, which holds the model API keys and agents' budgets. A
// flock without upstreams has no gateway.
type ModelGateway struct {
	Upstreams []Upstream // sorted by name
	// Slot is the pool slot the gateway takes (the pool's last): its UID is
	// uidBase + Slot, and on the docker target that slot's subnet is its own
	// network to the bus, and the one before it the egress network.
	Slot   int
	UID    int
	Net    netip.Prefix // the gateway's network to the bus (docker)
	Egress netip.Prefix // the egress network, the one with a route out (docker)
	Limits Limits
	// Defaults are every agent's budget and allow-list unless it has its own.
	Defaults ModelGatewayAccess
	// EgressRules are the agents' way out: flock:gateway.egress checked and
	// its presets expanded, then each allowHosts entry as a tunnel rule.
	// Credentials name their secret config key (Credential.Secret).
	EgressRules []egress.Rule
	// EgressConfigured: flock:gateway.egress is set (EgressRules may also
	// hold allowHosts tunnels without it).
	EgressConfigured bool
}

// EgressFor is the rules agent may use.
func (g ModelGateway) EgressFor(agent string) []egress.Rule {
	var out []egress.Rule
	for _, r := range g.EgressRules {
		if len(r.Agents) == 0 || slices.Contains(r.Agents, agent) {
			out = append(out, r)
		}
	}
	return out
}

// Brokered reports whether any rule is brokered (not a tunnel): the
// gateway then needs the egress CA.
func (g ModelGateway) Brokered() bool {
	for _, r := range g.EgressRules {
		if !r.Tunnel {
			return true
		}
	}
	return false
}

// Enabled reports whether the flock has a gateway.
func (g ModelGateway) Enabled() bool { return len(g.Upstreams) > 0 }

// Upstream is a model API the gateway forwards to. The key itself is not
// in the model: it is the secret config key flock:<KeySecret>.
type Upstream struct {
	Name      string
	URL       string
	KeyHeader string
	KeyPrefix string
	KeySecret string
	// API is the upstream's kind ("anthropic" or "openai"): which endpoints
	// the gateway forwards and how it meters them.
	API string
	// Prices are flat prices in tokens per call (protocol.GatewayPriceKey).
	Prices map[string]int64
}

// ModelGatewayAccess is one agent's part of the gateway.
type ModelGatewayAccess struct {
	// BudgetTokens caps the tokens the agent may spend; 0: no cap.
	BudgetTokens int64
	// BudgetWindow starts the budget over at 00:00 UTC each day or on the
	// first of each month (protocol.WindowDay, WindowMonth); empty: never.
	BudgetWindow string
	// AllowHosts are the host:port the agent may reach through the
	// gateway's CONNECT proxy (HTTPS_PROXY); none: no proxy.
	AllowHosts []string
	// AllowHostsKey is the config key AllowHosts comes from
	// (flock:gateway.allowHosts or flock:agents[i].gateway.allowHosts), so
	// that a target refusing allow-lists names the key the user wrote.
	AllowHostsKey string
}

// ModelGatewayConfig is flock:gateway.
type ModelGatewayConfig struct {
	Upstreams map[string]UpstreamConfig `json:"upstreams"`
	// BudgetTokens and AllowHosts are every agent's unless its
	// flock:agents entry says otherwise.
	BudgetTokens *int64       `json:"budgetTokens"`
	BudgetWindow *string      `json:"budgetWindow"`
	AllowHosts   []string     `json:"allowHosts"`
	Limits       LimitsConfig `json:"limits"`
	// Egress are the hosts agents may reach through the gateway
	// (EgressKey).
	Egress []egress.Rule `json:"egress"`
}

// AgentModelGatewayConfig is flock:agents[].gateway.
type AgentModelGatewayConfig struct {
	BudgetTokens *int64   `json:"budgetTokens"`
	BudgetWindow *string  `json:"budgetWindow"`
	AllowHosts   []string `json:"allowHosts"`
}

// UpstreamConfig is one entry of flock:gateway.upstreams.
type UpstreamConfig struct {
	URL       string  `json:"url"`
	KeyHeader string  `json:"keyHeader"`
	KeyPrefix *string `json:"keyPrefix"`
	KeySecret string  `json:"keySecret"`
	API       string  `json:"api"`
	// Prices lets the gateway forward what it cannot meter, at a flat
	// price in tokens per call.
	Prices map[string]int64 `json:"prices"`
}

// Well-known upstreams: their URL and key header are the defaults under
// their name, and the stacks point the SDKs' base-URL variables at them.
var knownUpstreams = map[string]Upstream{
	"anthropic": {URL: "https://api.anthropic.com", KeyHeader: "x-api-key", API: "anthropic"},
	"openai":    {URL: "https://api.openai.com", KeyHeader: "Authorization", KeyPrefix: "Bearer ", API: "openai"},
}

// DefaultModelGatewayLimits bound the gateway container.
var DefaultModelGatewayLimits = Limits{CPUs: 0.5, MemoryMiB: 128, Pids: 256, TmpfsMiB: 16, TaskTimeout: DefaultBus.Limits.TaskTimeout, Concurrency: 1}

// MaxBudgetTokens is the largest budget one can write (a trillion tokens).
const MaxBudgetTokens = 1_000_000_000_000

var (
	upstreamName = regexp.MustCompile(protocol.UpstreamNameRule)
	secretKey    = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]{0,63}$`)
	headerName   = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
)

// DefaultKeySecret is the config key holding an upstream's key unless
// keySecret names another: flock:<name>ApiKey (dashes dropped).
func DefaultKeySecret(upstream string) string {
	return strings.ReplaceAll(upstream, "-", "") + "ApiKey"
}

func (g ModelGatewayConfig) validate(es *errs, net Network, uidBase int) ModelGateway {
	var out ModelGateway
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range g.Upstreams {
			if !yield(k) {
				return
			}
		}
	}) {
		c := g.Upstreams[name]
		key := "flock:gateway.upstreams." + name
		if !upstreamName.MatchString(name) {
			es.add(key, "the upstream's name must match %s: agents call $FLOCK_GATEWAY_URL/<name>/…", upstreamName)
			continue
		}
		up := knownUpstreams[name]
		up.Name = name
		if c.URL != "" {
			up.URL = c.URL
		}
		if c.KeyHeader != "" {
			up.KeyHeader = c.KeyHeader
		}
		if c.KeyPrefix != nil {
			up.KeyPrefix = *c.KeyPrefix
		}
		up.KeySecret = c.KeySecret
		if up.KeySecret == "" {
			up.KeySecret = DefaultKeySecret(name)
		}
		ok := true
		if c.API != "" {
			up.API = c.API
		}
		for _, k := range slices.Sorted(maps.Keys(c.Prices)) {
			switch v := c.Prices[k]; {
			case !protocol.GatewayPriceKey.MatchString(k):
				es.add(fmt.Sprintf("%s.prices[%q]", key, k), "must be \"METHOD /path\" (an endpoint outside the allow-list, such as \"POST /v1/messages/batches\") or \"tool:<type prefix>\" (such as \"tool:web_search\")")
				ok = false
			case v < 0 || v > 1_000_000_000:
				es.add(fmt.Sprintf("%s.prices[%q]", key, k), "must be 0 to 1000000000 tokens per call (got %d)", v)
				ok = false
			}
		}
		if len(c.Prices) > 0 {
			up.Prices = maps.Clone(c.Prices)
		}
		if up.API != "anthropic" && up.API != "openai" {
			es.add(key+".api", "must be \"anthropic\" or \"openai\": the API kind fixes the endpoints the gateway forwards and how it meters them (got %q)", up.API)
			ok = false
		}
		if u, err := url.Parse(up.URL); up.URL == "" {
			es.add(key+".url", "is required for an upstream other than %s", strings.Join(slices.Sorted(func(y func(string) bool) {
				for k := range knownUpstreams {
					if !y(k) {
						return
					}
				}
			}), " and "))
			ok = false
		} else if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			es.add(key+".url", "must be an absolute http(s) URL with no credentials, query or fragment, such as https://api.anthropic.com (got %q)", up.URL)
			ok = false
		}
		if !headerName.MatchString(up.KeyHeader) {
			es.add(key+".keyHeader", "must be a header name such as x-api-key or Authorization (got %q)", up.KeyHeader)
			ok = false
		}
		if strings.ContainsAny(up.KeyPrefix, "\r\n") {
			es.add(key+".keyPrefix", "must not contain CR or LF")
			ok = false
		}
		if !secretKey.MatchString(up.KeySecret) {
			es.add(key+".keySecret", "must name a config key of the flock: namespace, letters and digits, such as anthropicApiKey (got %q)", up.KeySecret)
			ok = false
		}
		if ok {
			out.Upstreams = append(out.Upstreams, up)
		}
	}
	out.Limits = g.Limits.validate(es, "flock:gateway.limits", DefaultModelGatewayLimits)
	if g.Limits.DiskMiB != nil {
		es.add("flock:gateway.limits.diskMiB", "is an agent's limit: the gateway keeps nothing on disk")
	}
	if g.BudgetTokens != nil {
		out.Defaults.BudgetTokens = budget(es, "flock:gateway.budgetTokens", *g.BudgetTokens)
	}
	out.Defaults.AllowHosts = allowHosts(es, "flock:gateway.allowHosts", g.AllowHosts)
	if g.AllowHosts != nil {
		out.Defaults.AllowHostsKey = "flock:gateway.allowHosts"
	}
	if g.BudgetWindow != nil {
		out.Defaults.BudgetWindow = window(es, "flock:gateway.budgetWindow", *g.BudgetWindow)
	}
	if len(g.Upstreams) == 0 && (g.BudgetTokens != nil || g.BudgetWindow != nil || g.AllowHosts != nil || g.Egress != nil) {
		es.add("flock:gateway.upstreams", "is required with budgetTokens, budgetWindow, allowHosts or egress: a flock without upstreams has no gateway")
	}
	capacity := net.Capacity()
	out.Slot = capacity - 1
	out.UID = uidBase + out.Slot
	if capacity >= 3 {
		out.Net, _ = net.subnetFor(capacity - 1)
		out.Egress, _ = net.subnetFor(capacity - 2)
	}
	return out
}

// access returns an agent's gateway settings: its own, validated, where it
// has them, else the stack's (validated once, by Gateway.validate).
func (g ModelGatewayConfig) access(es *errs, key string, own *AgentModelGatewayConfig, gw ModelGateway) ModelGatewayAccess {
	out := gw.Defaults
	if own == nil {
		return out
	}
	if !gw.Enabled() {
		es.add(key+".gateway", "the flock has no gateway: list its upstreams in flock:gateway.upstreams")
		return out
	}
	if own.BudgetTokens != nil {
		out.BudgetTokens = budget(es, key+".gateway.budgetTokens", *own.BudgetTokens)
	}
	if own.BudgetWindow != nil {
		out.BudgetWindow = window(es, key+".gateway.budgetWindow", *own.BudgetWindow)
	}
	if own.AllowHosts != nil {
		out.AllowHosts = allowHosts(es, key+".gateway.allowHosts", own.AllowHosts)
		out.AllowHostsKey = key + ".gateway.allowHosts"
	}
	return out
}

func budget(es *errs, key string, v int64) int64 {
	if v < 0 || v > MaxBudgetTokens {
		es.add(key, "must be between 0 (no cap) and %d tokens (got %d)", int64(MaxBudgetTokens), v)
		return 0
	}
	return v
}

func window(es *errs, key, w string) string {
	if w == "none" {
		return protocol.WindowNone
	}
	if !protocol.ValidWindow(w) {
		es.add(key, "must be %q (the budget starts over at 00:00 UTC each day), %q (on the first of each month) or %q (never) (got %q)",
			protocol.WindowDay, protocol.WindowMonth, "none", w)
		return protocol.WindowNone
	}
	return w
}

func allowHosts(es *errs, key string, hosts []string) []string {
	var out []string
	for i, hp := range hosts {
		if err := validHostPort(hp); err != nil {
			es.add(fmt.Sprintf("%s[%d]", key, i), "%v", err)
			continue
		}
		out = append(out, strings.ToLower(hp))
	}
	return out
}

// validHostPort checks an allow-list entry: host:port, the host a name, an
// IP or "*." and a name (names under it, not itself).
func validHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("must be host:port such as pypi.org:443 or *.github.com:443 (got %q)", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > math.MaxUint16 {
		return fmt.Errorf("port must be 1-65535 (got %q)", hp)
	}
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.ContainsAny(name, "*/ ") {
		return fmt.Errorf("host must be a name, an IP or *.name (got %q)", hp)
	}
	return nil
}

// GatewayAddress is the gateway's address on a network of the flock (an
// agent's, or its own): the last one, so that it never takes an address the
// engine would hand an agent or a bus node.
func GatewayAddress(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(1)<<(32-p.Bits()) - 2 // the broadcast address less one
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
