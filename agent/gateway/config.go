// Package gateway is the model gateway's core: an http.Handler that forwards an
// agent's model calls to an upstream API with a key the agent never holds,
// meters the tokens each response reports, refuses calls past an agent's
// budget, and hands the agents' way out (CONNECT, and plain-HTTP proxy
// requests) to the egress broker (agent/gateway/broker), which knows the
// rules of each host.
// The gateway knows a caller by its source address (Config.CallerOf) or,
// where agents share one network, by the token its request carries in place
// of an API key (Config.CallerOfRequest); never by anything else the request
// says. Each agent has a cap on its requests in flight, so one agent's flood
// cannot take the gateway from the others.
package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
)

// Defaults of Config's limits.
const (
	DefaultMaxInFlight = 32
	// DefaultMinFittedOutputTokens: an answer of fewer tokens is seldom of
	// use; below it the agent is told its budget is spent.
	DefaultMinFittedOutputTokens = 256
	// DefaultResponseHeaderTimeout: a model may think long before its first
	// byte, but an upstream that never answers must not hold a call forever.
	DefaultResponseHeaderTimeout = 10 * time.Minute
)

// namePattern is the rule for upstream names and agent IDs (AGENT_ID's rule).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// headerNamePattern: a header name the transport will send as is.
var headerNamePattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// Upstream is one model API the gateway forwards to.
type Upstream struct {
	// API is the upstream's kind, APIAnthropic or APIOpenAI: it fixes which
	// endpoints are forwarded and how each is metered. Empty: the
	// upstream's name, when that is a kind.
	API string
	// Prices are the operator's flat prices in tokens per call: "METHOD
	// /path" forwards an endpoint outside the kind's allow-list, "tool:<type
	// prefix>" a server-side tool billed per use (web_search, ...). Without
	// a price both are refused.
	Prices    map[string]int64
	URL       string // absolute http(s) base URL; /<name>/<path> goes to URL/<path>
	KeyHeader string // the header the key goes in: "x-api-key", "Authorization"
	KeyPrefix string // put before the key: "Bearer " for Authorization
	Key       string // the secret; it never appears in logs or errors
}

// Usage is what one call cost, as the upstream reported it, normalized across
// formats: InputTokens counts every prompt token the model read, cached or not
// (for Anthropic input_tokens + cache_creation_input_tokens +
// cache_read_input_tokens; for OpenAI prompt_tokens / input_tokens, which
// already include the cached ones), CacheReadTokens and CacheWriteTokens say
// how many of them came from or went to the cache, and Total = InputTokens +
// OutputTokens is what the budget is charged.
type Usage struct {
	Agent            string
	Upstream         string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	Total            int64
	Status           int           // the upstream's HTTP status
	SpentTokens      int64         // the agent's total after this call was charged
	BudgetTokens     int64         // the agent's budget; 0: none (Config.Budgets has no entry)
	Duration         time.Duration // from the request's arrival to the response's end
	Trace            string        // the W3C trace ID of the call's traceparent header ("": none)
}

// Config is the gateway's whole configuration.
type Config struct {
	// Upstreams by name: /<name>/... is forwarded to that upstream.
	Upstreams map[string]Upstream
	// CallerOf names the agent a request's source address belongs to; false
	// refuses the request (403).
	CallerOf func(remote netip.Addr) (agentID string, ok bool)
	// CallerOfRequest names the agent from a credential the request carries
	// (the agent's gateway token as its API key); false refuses it (401, 407
	// for CONNECT). Every credential header is stripped before forwarding all
	// the same. Exactly one of CallerOf and CallerOfRequest must be set.
	CallerOfRequest func(r *http.Request) (agentID string, ok bool)
	// DefaultMaxOutputTokens is written into a metered request that names
	// no output cap (max_tokens, max_completion_tokens, max_output_tokens),
	// so the upstream cannot bill more than was reserved. 0:
	// DefaultMaxOutputTokens.
	DefaultMaxOutputTokens int64
	// MinFittedOutputTokens is the smallest output cap the gateway writes in
	// to fit what is left of an agent's budget, when a request names none
	// and DefaultMaxOutputTokens would not fit: with less left than that (and
	// the input), the call is refused. 0: DefaultMinFittedOutputTokens.
	MinFittedOutputTokens int64
	// MaxInFlight caps each agent's requests in flight (model calls and
	// egress connections, one cap for both: an agent's CONNECT holds a place
	// until its connection ends); over it the gateway answers 429. 0:
	// DefaultMaxInFlight.
	MaxInFlight int
	// ResponseHeaderTimeout bounds the wait for an upstream's response
	// headers. 0: DefaultResponseHeaderTimeout.
	ResponseHeaderTimeout time.Duration
	// Budgets caps each agent's tokens; an agent absent, or with 0, has no
	// cap. BudgetWindows start an agent's budget over each UTC day or
	// month (protocol.WindowDay, WindowMonth); absent: never.
	Budgets       map[string]int64
	BudgetWindows map[string]string
	// Ledger is where spending is kept: the bus's (ledger.Bus), shared by
	// every gateway and kept across restarts, or an earlier gateway's (a
	// reload). nil: a new ledger.Memory, which starts from zero.
	Ledger ledger.Ledger
	// Egress serves the agents' way out: CONNECT host:port and plain-HTTP
	// proxy requests (absolute-form). nil: both refused (403).
	Egress *broker.Broker
	// Logger gets the access log; nil is slog.Default().
	Logger *slog.Logger
	// OnUsage, if set, is called once for every metered response, after it
	// has been sent to the agent and charged.
	OnUsage func(Usage)
	// OnSpan, if set, gets a span for every call that carried a valid
	// traceparent: the gateway serving it, a child of the caller's span
	// (and the parent the upstream is given).
	OnSpan func(protocol.Span)
	// TaskTrace, if set, is the span of the agent's one running task
	// (false: none, or more than one): a call that carries no valid
	// traceparent is tied to it, as if it carried it.
	TaskTrace func(agent string) (protocol.TraceParent, bool)
}

// Validate returns every problem of the configuration, each naming the field
// and the rule. A key's value never appears in an error.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	for _, name := range sortedKeys(c.Upstreams) {
		up := c.Upstreams[name]
		field := fmt.Sprintf("upstreams[%q]", name)
		if !namePattern.MatchString(name) {
			bad(field, "name must match %s: it is the first path element agents call", namePattern)
		}
		errs = append(errs, CheckUpstream(field, up)...)
		for _, k := range sortedKeys(up.Prices) {
			if !PriceKey.MatchString(k) {
				bad(fmt.Sprintf("%s.prices[%q]", field, k), "must be \"METHOD /path\" or \"tool:<type prefix>\" (%s)", PriceKey)
			} else if v := up.Prices[k]; v < 0 || v > maxTokens {
				bad(fmt.Sprintf("%s.prices[%q]", field, k), "must be 0 to %d tokens per call (got %d)", int64(maxTokens), v)
			}
		}
		if _, ok := endpoints[up.Kind(name)]; !ok {
			bad(field+".api", "must be %q or %q: the API kind fixes the endpoints the gateway forwards and meters (got %q)", APIAnthropic, APIOpenAI, up.API)
		}
		if up.Key == "" {
			bad(field+".key", "must not be empty: the gateway holds the key so agents do not")
		} else if strings.ContainsAny(up.Key, "\r\n") {
			bad(field+".key", "must not contain CR or LF")
		}
	}
	switch {
	case c.CallerOf == nil && c.CallerOfRequest == nil:
		bad("callerOf", "required: set CallerOf (callers known by source address) or CallerOfRequest (by token)")
	case c.CallerOf != nil && c.CallerOfRequest != nil:
		bad("callerOf", "set only one of CallerOf and CallerOfRequest: a caller is known one way")
	}
	if c.DefaultMaxOutputTokens < 0 {
		bad("defaultMaxOutputTokens", "must be >= 0 (0: %d) (got %d)", DefaultMaxOutputTokens, c.DefaultMaxOutputTokens)
	}
	if c.MinFittedOutputTokens < 0 || c.MinFittedOutputTokens > cmp.Or(c.DefaultMaxOutputTokens, DefaultMaxOutputTokens) {
		bad("minFittedOutputTokens", "must be 0 to defaultMaxOutputTokens (%d) (0: %d): the smallest cap fitted to a budget is at most the cap it replaces (got %d)",
			cmp.Or(c.DefaultMaxOutputTokens, DefaultMaxOutputTokens), DefaultMinFittedOutputTokens, c.MinFittedOutputTokens)
	}
	if c.MaxInFlight < 0 {
		bad("maxInFlight", "must be >= 0 (0: %d) (got %d)", DefaultMaxInFlight, c.MaxInFlight)
	}
	if c.ResponseHeaderTimeout < 0 {
		bad("responseHeaderTimeout", "must be >= 0 (0: %v) (got %v)", DefaultResponseHeaderTimeout, c.ResponseHeaderTimeout)
	}
	for _, agent := range sortedKeys(c.Budgets) {
		field := fmt.Sprintf("budgets[%q]", agent)
		if !namePattern.MatchString(agent) {
			bad(field, "must be an agent ID matching %s", namePattern)
		}
		if n := c.Budgets[agent]; n < 0 {
			bad(field, "must be >= 0 tokens (0: no cap) (got %d)", n)
		}
	}
	for _, agent := range sortedKeys(c.BudgetWindows) {
		if w := c.BudgetWindows[agent]; !protocol.ValidWindow(w) {
			bad(fmt.Sprintf("budgetWindows[%q]", agent), "must be %q, %q or empty (no window) (got %q)", protocol.WindowDay, protocol.WindowMonth, w)
		}
	}
	return errors.Join(errs...)
}

// CheckUpstream returns what is wrong with up's URL, key header and key
// prefix (not its key), each error prefixed with field: how the caller's
// configuration names that upstream.
func CheckUpstream(field string, up Upstream) []error {
	var errs []error
	bad := func(sub, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{field, sub}, args...)...))
	}
	u, err := url.Parse(up.URL)
	switch {
	case err != nil:
		bad("url", "not a URL: %v", err.(*url.Error).Err) // the URL itself may hold a secret
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		bad("url", "must be an absolute http or https URL (got %q)", up.URL)
	case u.User != nil:
		bad("url", "must not carry credentials: the key goes in key")
	case u.RawQuery != "" || u.Fragment != "":
		bad("url", "must have no query or fragment (got %q)", up.URL)
	}
	if !headerNamePattern.MatchString(up.KeyHeader) {
		bad("keyHeader", "must be a header name such as x-api-key or Authorization (got %q)", up.KeyHeader)
	}
	if strings.ContainsAny(up.KeyPrefix, "\r\n") {
		bad("keyPrefix", "must not contain CR or LF")
	}
	return errs
}

// CheckName says whether s may name an upstream or an agent: AGENT_ID's rule.
func CheckName(s string) error {
	if !namePattern.MatchString(s) {
		return fmt.Errorf("must match %s (got %q)", namePattern, s)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Kind is the upstream's API kind: API, or its name when that names a kind.
func (u Upstream) Kind(name string) string {
	if u.API != "" {
		return u.API
	}
	if _, ok := endpoints[name]; ok {
		return name
	}
	return ""
}
