package protocol

import (
	"regexp"
	"time"

	"github.com/ai-flock/ai-flock/protocol/egress"
)

// The model gateway's contract: what the stacks give the gateway (its config
// file, its keys), what they give agents (the variables below), and what the
// gateway publishes on the bus (Usage on agent.<id>.usage).

// GatewayPort serves the model APIs (/<upstream>/<path>) and the CONNECT
// proxy on every agent network (dev) or the agents' security group (aws).
const GatewayPort = 8080

// GatewayHealthPort serves /healthz on the gateway's loopback only.
const GatewayHealthPort = 8081

// Paths inside the gateway container.
const (
	GatewayConfigDir  = "/etc/flock/gateway"
	GatewayConfigFile = GatewayConfigDir + "/gateway.json"
	// GatewayKeysDir holds one file per upstream, named after it, holding its
	// key (dev: a host directory only the gateway's UID can read).
	GatewayKeysDir = GatewayConfigDir + "/keys"
	// GatewayCredsFile is the gateway's own bus credential (its nkey seed).
	GatewayCredsFile = GatewayConfigDir + "/nats.nk"
)

// GatewayUser is the gateway's bus user: it may publish usage and read and
// write the spending ledger's entries, nothing else.
const GatewayUser = "gateway"

// The gateway's environment.
const (
	EnvGatewayConfig = "FLOCK_GATEWAY_CONFIG" // path of its GatewayConfig file
	// aws: the config itself travels in the environment (EncodeEnv parts
	// under this prefix), and each key in GatewayUpstream.KeyEnv.
	EnvGatewayConfigData = "FLOCK_GATEWAY_CONFIG_DATA"
)

// The environment the stacks give an agent when the flock has a gateway.
const (
	EnvGatewayURL       = "FLOCK_GATEWAY_URL"  // http://<gateway>:8080
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL" // $FLOCK_GATEWAY_URL/anthropic, when an upstream is named so
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"    // $FLOCK_GATEWAY_URL/openai/v1, when an upstream is named so
	// EnvGatewayToken is the agent's gateway token on aws, where agents share
	// one network and the gateway cannot tell them apart by address. Stock
	// SDKs send it as their API key; the gateway takes the caller from it and
	// replaces it with the upstream's key.
	EnvGatewayToken = "FLOCK_GATEWAY_TOKEN"
	// The SDKs' own key variables, for the well-known upstreams: a stock
	// SDK refuses to call without a key, though the gateway holds the real
	// one. On dev they hold GatewayPlaceholderKey; on aws the agent's
	// gateway token (from the same secret as EnvGatewayToken), which names
	// the caller however the SDK sends it (x-api-key, Authorization: Bearer).
	EnvAnthropicAPIKey = "ANTHROPIC_API_KEY"
	EnvOpenAIAPIKey    = "OPENAI_API_KEY"
	EnvHTTPSProxy      = "HTTPS_PROXY" // the gateway, when an egress rule names the agent
	EnvHTTPProxy       = "HTTP_PROXY"
	EnvNoProxy         = "NO_PROXY" // the gateway and the bus: never through the proxy
)

// ProxyVars are the variables naming the gateway as the agents' proxy, in
// both cases (libcurl, hence git, reads only the lower-case ones). On aws
// their value carries the agent's token, so they come from a secret.
var ProxyVars = []string{EnvHTTPSProxy, "https_proxy", EnvHTTPProxy, "http_proxy"}

// GatewayPlaceholderKey is the API key an agent's SDKs hold on dev, where
// the gateway knows a caller by its network: not a credential (the gateway
// strips it and puts in the upstream's key), only what lets a stock SDK
// call. The policy pack lets an agent hold it, and nothing else shaped
// like a key.
const GatewayPlaceholderKey = "flock-gateway-holds-the-key"

// GatewayAgentVars are the variables above: the agent passes them on to its
// tasks and its program whatever ENV_ALLOW says, so that the work an agent
// runs reaches the model through the gateway.
var GatewayAgentVars = append([]string{
	EnvGatewayURL, EnvAnthropicBaseURL, EnvOpenAIBaseURL, EnvGatewayToken,
	EnvAnthropicAPIKey, EnvOpenAIAPIKey,
	EnvHTTPSProxy, EnvHTTPProxy, EnvNoProxy,
	"https_proxy", "http_proxy", "no_proxy",
}, EgressCAVars...)

// Roles (LabelRole) of the gateway and of the one network with a route out.
const (
	RoleGateway = "gateway"
	RoleEgress  = "egress"
)

// GatewayConfig is the gateway's whole configuration, rendered by the stacks
// from the flock model. It holds no key: keys come from KeyFile or KeyEnv.
type GatewayConfig struct {
	V         int               `json:"v"`
	Flock     string            `json:"flock"`
	Upstreams []GatewayUpstream `json:"upstreams"`
	Agents    []GatewayAgent    `json:"agents"`
	// Callers is how the gateway knows who calls: "network" (dev: each
	// agent's own network, GatewayAgent.Network) or "token" (aws:
	// GatewayAgent.TokenSHA256).
	Callers string `json:"callers"`
	// NATSURL and NkeyFile (or NkeyEnv) reach the bus as GatewayUser, to
	// keep the spending ledger there and publish usage. Empty NATSURL: a
	// ledger in memory (a restart starts every agent over), no usage on the
	// bus.
	NATSURL  string `json:"natsUrl,omitempty"`
	NkeyFile string `json:"nkeyFile,omitempty"`
	NkeyEnv  string `json:"nkeyEnv,omitempty"`
	// OTLPEndpoint, when set, is where the gateway exports the flock's
	// spans over OTLP/HTTP (its own and the services' on SpansSubject).
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
	// Egress is the agents' way out; nil: none (CONNECT and proxy requests
	// refused).
	Egress *GatewayEgress `json:"egress,omitempty"`
}

// GatewayEgress is what the gateway's egress broker enforces.
type GatewayEgress struct {
	// Rules are the hosts agents may reach, presets expanded, each
	// credential naming the file or variable the gateway reads it from.
	Rules []egress.Rule `json:"rules"`
	// CASeedFile or CASeedEnv holds the flock's egress CA seed (hex, 32
	// bytes): the CA whose leaves the gateway shows agents for brokered
	// hosts. Only the gateway reads it; agents get the CA's certificate.
	CASeedFile string `json:"caSeedFile,omitempty"`
	CASeedEnv  string `json:"caSeedEnv,omitempty"`
	// Pool is the flock's own address space (CIDRs): never an upstream,
	// whatever a name resolves to.
	Pool []string `json:"pool,omitempty"`
}

// The egress CA's files and variables.
const (
	// EnvGatewayEgressRules is the gateway's egress rules (JSON, no
	// credential in them) in the environment of the dev stack's
	// gateway-config step and of the aws gateway's task definition: a
	// plain input the policy pack reads, so that it can flag blind tunnels
	// and extra roots.
	EnvGatewayEgressRules = "FLOCK_GATEWAY_EGRESS_RULES"
	// GatewayEgressCASeed is the CA seed's file in GatewayKeysDir on dev
	// (a dot: no upstream's key file has one).
	GatewayEgressCASeed = "egress.ca-seed"
	// GatewayEgressCredentialPrefix starts a credential's file in
	// GatewayKeysDir on dev: egress.<its secret config key>.
	GatewayEgressCredentialPrefix = "egress."
	// EnvEgressCA is the flock's egress CA certificate (PEM) in an agent's
	// environment: the runtime writes EgressCABundleFile from it.
	EnvEgressCA = "FLOCK_EGRESS_CA"
	// EgressCABundleFile is the bundle an agent's tools read: the image's
	// system roots, if it has any, and the flock's egress CA.
	EgressCABundleFile = "/run/flock/ca-bundle.pem"
)

// EgressCAVars are the variables the usual tools read a CA bundle from
// (OpenSSL and Go, git with GnuTLS, curl, Python requests, pip, Node): each
// is set to EgressCABundleFile when the flock has egress rules.
var EgressCAVars = []string{"SSL_CERT_FILE", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"}

// Ways the gateway knows its callers (GatewayConfig.Callers).
const (
	CallersByNetwork = "network"
	CallersByToken   = "token"
)

// GatewayUpstream is one model API: /<Name>/<path> goes to <URL>/<path> with
// the key in KeyHeader (after KeyPrefix).
type GatewayUpstream struct {
	Name string `json:"name"`
	API  string `json:"api,omitempty"` // "anthropic" or "openai"; empty: the name, when it is one
	// Prices are the operator's flat prices in tokens per call
	// (GatewayPriceKey): an endpoint outside the kind's allow-list, or a
	// server-side tool billed per use.
	Prices    map[string]int64 `json:"prices,omitempty"`
	URL       string           `json:"url"`
	KeyHeader string           `json:"keyHeader"`
	KeyPrefix string           `json:"keyPrefix,omitempty"`
	KeyFile   string           `json:"keyFile,omitempty"`
	KeyEnv    string           `json:"keyEnv,omitempty"`
}

// GatewayAgent is what the gateway knows of one agent.
type GatewayAgent struct {
	ID string `json:"id"`
	// Network is the agent's own network (CIDR): a request from an address in
	// it is that agent's (Callers "network").
	Network string `json:"network,omitempty"`
	// TokenSHA256 is the hex SHA-256 of the agent's gateway token (Callers
	// "token"); the token itself is only in the agent's environment.
	TokenSHA256 string `json:"tokenSha256,omitempty"`
	// BudgetTokens caps the tokens the agent may spend (input + output, as
	// the upstreams report them); 0: no cap.
	BudgetTokens int64 `json:"budgetTokens,omitempty"`
	// BudgetWindow starts the budget over each UTC day or month (WindowDay,
	// WindowMonth); empty: never.
	BudgetWindow string `json:"budgetWindow,omitempty"`
}

// UsageSubject is where the gateway publishes what agent id's calls cost.
func UsageSubject(id string) string { return "agent." + id + ".usage" }

// SubjectUsage is every agent's usage.
const SubjectUsage = "agent.*.usage"

// Usage is the body the gateway publishes on agent.<id>.usage after each
// metered call: the tokens the upstream reported, and the agent's total.
type Usage struct {
	V                int       `json:"v"`
	Agent            string    `json:"agent"`
	Upstream         string    `json:"upstream"`
	Time             time.Time `json:"time"`
	Status           int       `json:"status"` // the upstream's HTTP status
	InputTokens      int64     `json:"input_tokens"`
	OutputTokens     int64     `json:"output_tokens"`
	CacheReadTokens  int64     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64     `json:"cache_write_tokens,omitempty"`
	Total            int64     `json:"total"` // input + output: what the budget is charged
	// SpentTokens is the agent's total in its budget's period, this call
	// included, and the bounds of its calls still in flight.
	SpentTokens  int64 `json:"spent_tokens"`
	BudgetTokens int64 `json:"budget_tokens,omitempty"`
	// DurationMS is how long the call took, from its arrival at the
	// gateway to the response's end (a stream's too).
	DurationMS float64 `json:"duration_ms,omitempty"`
	// Trace is the W3C trace ID the call carried (its traceparent header).
	Trace string `json:"trace,omitempty"`
}

// GatewayPriceKey is the rule for a gateway price's key: "METHOD /path" (an
// endpoint outside the upstream kind's allow-list, priced per call) or
// "tool:<type prefix>" (a server-side tool billed per use, priced per call
// that offers it: web_search, code_execution, code_interpreter,
// file_search, image_generation).
var GatewayPriceKey = regexp.MustCompile(`^((GET|POST|PUT|PATCH|DELETE) /[A-Za-z0-9._~/:-]+|tool:[a-z_]+)$`)

// UpstreamNameRule is the rule for an upstream's name (a key of
// flock:gateway.upstreams): agents call the gateway at /<name>/….
const UpstreamNameRule = `^[a-z][a-z0-9-]{0,30}$`

var upstreamNamePattern = regexp.MustCompile(UpstreamNameRule)

// ValidUpstreamName reports whether s may name an upstream.
func ValidUpstreamName(s string) bool { return upstreamNamePattern.MatchString(s) }

// EgressSubject is where the gateway publishes what each of agent id's
// egress connections did, when it ends: one EgressUse per connection, never
// one per request (an npm install would flood every reader).
func EgressSubject(id string) string { return "agent." + id + ".egress" }

// SubjectEgress is every agent's egress use.
const SubjectEgress = "agent.*.egress"

// Kinds of egress connection (EgressUse.Kind).
const (
	EgressBrokered = "brokered" // TLS ended at the gateway, each request checked
	EgressTunnel   = "tunnel"   // a blind tunnel, by rule
	EgressPlain    = "plain"    // plain-HTTP proxy requests
	EgressRefused  = "refused"  // refused before any request: no rule, a private address, a TLS name that was not the host
)

// EgressUse is the body of agent.<id>.egress: what one connection did. It
// holds no body, no query string and no credential; Host is the name the
// agent asked for, Rule the key of the rule that served it ("" for none).
type EgressUse struct {
	V          int              `json:"v"`
	Agent      string           `json:"agent"`
	Host       string           `json:"host"`
	Rule       string           `json:"rule,omitempty"`
	Kind       string           `json:"kind"`
	Time       time.Time        `json:"time"` // when it ended
	Requests   int64            `json:"requests,omitempty"`
	Refused    int64            `json:"refused,omitempty"`
	Sent       int64            `json:"sent,omitempty"`     // bytes agent → upstream (request bodies; a tunnel: every byte)
	Received   int64            `json:"received,omitempty"` // bytes upstream → agent
	Statuses   map[string]int64 `json:"statuses,omitempty"` // the upstream's HTTP statuses, counted
	DurationMS float64          `json:"duration_ms,omitempty"`
	// Refusals are the first few refused requests (method, path without
	// its query, why, and the rule that would have allowed it), for the
	// operator to review.
	Refusals []EgressRefusal `json:"refusals,omitempty"`
}

// EgressRefusal is one refused request of an EgressUse.
type EgressRefusal struct {
	Method  string       `json:"method"`
	Path    string       `json:"path,omitempty"`
	Why     string       `json:"why"`
	Suggest *egress.Rule `json:"suggest,omitempty"`
}

// egressHostPattern is a host:port an egress record may name: a DNS name
// (or an IPv4 address) and a port. The name is whatever the agent asked
// for, so readers keep only what keeps this rule.
var egressHostPattern = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,252}[A-Za-z0-9_.])?:[0-9]{1,5}$`)

// ValidEgressHost reports whether s may name an egress record's host.
func ValidEgressHost(s string) bool { return egressHostPattern.MatchString(s) }

// egressRefusalPattern is what an audit entry keeps of a refused request:
// a method, and a path of printable ASCII without its query (or the
// method alone: a CONNECT refused).
var egressRefusalPattern = regexp.MustCompile(`^[A-Z]{1,20}( /[!-~]{0,1000})?$`)

// ValidEgressRefusal reports whether s may be kept as an audit entry's
// Refusal.
func ValidEgressRefusal(s string) bool { return egressRefusalPattern.MatchString(s) }
