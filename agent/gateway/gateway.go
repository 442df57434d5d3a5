package gateway

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
)

// agentCredentials are the request headers that could carry a credential.
// Stock SDKs refuse to start without a key, so agents send a dummy one; it
// and anything else the agent claims must never reach an upstream.
var agentCredentials = []string{"Authorization", "X-Api-Key", "Api-Key", "Cookie", "Proxy-Authorization"}

// Handler is the model gateway: the http.Handler agents call: /<upstream>/<path> for a model
// API, CONNECT host:port and plain-HTTP proxy requests for the egress broker.
type Handler struct {
	upstreams map[string]*upstream
	strip     []string // agentCredentials and every upstream's key header
	names     string   // the upstream names, for the 404 message
	callerOf  func(netip.Addr) (string, bool)
	callerReq func(*http.Request) (string, bool)
	inFlight  *inFlight
	ledger    ledger.Ledger
	budgets   map[string]ledger.Budget // absent: no cap
	outCap    int64                    // DefaultMaxOutputTokens
	minFit    int64                    // MinFittedOutputTokens
	buffers   *bodyBudget
	egress    *broker.Broker
	log       *slog.Logger
	onUsage   func(Usage)
	onSpan    func(protocol.Span)
	taskTrace func(string) (protocol.TraceParent, bool)
	proxy     *httputil.ReverseProxy
}

type upstream struct {
	name   string
	api    string           // APIAnthropic or APIOpenAI
	prices map[string]int64 // Upstream.Prices
	url    *url.URL
	header string // the key header
	value  string // prefix + key
}

// call is one forwarded request's state, shared by the proxy's hooks through
// the request's context.
type call struct {
	agent  string
	up     *upstream
	rest   string // the path after /<upstream>, escaped
	status int
	meter  *meter
	// A metered call's bound, reserved in the ledger until finish settles it.
	bound    int64
	reserved bool
	res      ledger.Reservation
	flat     bool     // an operator-priced endpoint: its price is its cost
	tools    int64    // the operator's price of the per-use tools it offered
	notes    []string // what the gateway changed in the request
	// What settle found: once settled, the call is never charged again.
	settled bool
	charged *Usage // what it was charged, when it held a reservation
	problem string // why its tokens could not be counted, if they could not
	extra   []any  // what the access log adds about the charge
}

type callKey struct{}

// New validates cfg and returns the gateway.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Handler{
		upstreams: make(map[string]*upstream, len(cfg.Upstreams)),
		names:     strings.Join(sortedKeys(cfg.Upstreams), ", "),
		callerOf:  cfg.CallerOf,
		callerReq: cfg.CallerOfRequest,
		inFlight:  newInFlight(cmp.Or(cfg.MaxInFlight, DefaultMaxInFlight)),
		ledger:    cfg.Ledger,
		budgets:   make(map[string]ledger.Budget, len(cfg.Budgets)),
		outCap:    cmp.Or(cfg.DefaultMaxOutputTokens, DefaultMaxOutputTokens),
		minFit:    cmp.Or(cfg.MinFittedOutputTokens, DefaultMinFittedOutputTokens),
		buffers:   newBodyBudget(maxBufferedBodies, maxBufferedPerAgent),
		egress:    cfg.Egress,
		log:       cfg.Logger,
		onUsage:   cfg.OnUsage,
		onSpan:    cfg.OnSpan,
		taskTrace: cfg.TaskTrace,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.ledger == nil {
		g.ledger = ledger.NewMemory()
	}
	for agent, n := range cfg.Budgets {
		g.budgets[agent] = ledger.Budget{Tokens: n, Window: cfg.BudgetWindows[agent]}
	}
	g.strip = append(g.strip, agentCredentials...)
	for name, up := range cfg.Upstreams {
		u, _ := url.Parse(up.URL) // Validate parsed it
		g.upstreams[name] = &upstream{name: name, api: up.Kind(name), prices: up.Prices, url: u, header: up.KeyHeader, value: up.KeyPrefix + up.Key}
		// One upstream's key header may not carry an agent's value to another.
		g.strip = append(g.strip, up.KeyHeader)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // many agents, one upstream host
	// An upstream is trusted with the agents' prompts, not with the
	// gateway's memory or its goroutines: its response head is bounded in
	// size and in time (the body streams, and is never held whole).
	tr.MaxResponseHeaderBytes = 64 << 10
	tr.ResponseHeaderTimeout = cmp.Or(cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.upstreamError,
		Transport:      tr,
		FlushInterval:  -1, // a token streamed is a token the agent sees at once
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	return g, nil
}

// Spent is the tokens agent has been charged in its budget's current
// period, as far as this gateway knows.
func (g *Handler) Spent(agent string) int64 { return g.ledger.Known(agent, g.budgets[agent]).Spent }

// inFlightOf is how many of agent's requests are in flight: 0 once every
// call it made has been settled and logged.
func (g *Handler) inFlightOf(agent string) int { return g.inFlight.of(agent) }

// Ledger is what the gateway meters with, for the next gateway of a reload
// (Config.Ledger).
func (g *Handler) Ledger() ledger.Ledger { return g.ledger }

func (g *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	agent, ok := g.caller(r)
	if !ok {
		g.refuseCaller(w, r)
		return
	}
	r = g.withSpan(r, agent)
	if !g.inFlight.acquire(agent) {
		g.log.Warn("refused: too many requests in flight", "agent", agent, "method", r.Method,
			"limit", g.inFlight.max, "status", http.StatusTooManyRequests)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, apiError{Type: "rate_limit_error", retry: true,
			Message: fmt.Sprintf("agent %s has %d requests in flight (the gateway's limit per agent)", agent, g.inFlight.max)})
		return
	}
	defer g.inFlight.release(agent)
	if r.Method == http.MethodConnect || r.URL.Host != "" {
		g.egressRequest(w, r, agent)
		return
	}
	name, rest := splitUpstream(r.URL.EscapedPath())
	up, ok := g.upstreams[name]
	if !ok {
		g.accessLog(agent, name, r, http.StatusNotFound, start, nil, "")
		writeError(w, http.StatusNotFound, apiError{Type: "unknown_upstream",
			Message: fmt.Sprintf("no upstream %q: call /<upstream>/<path> with one of: %s", name, g.names)})
		return
	}
	if hasDotDot(rest) {
		g.accessLog(agent, name, r, http.StatusBadRequest, start, nil, "")
		writeError(w, http.StatusBadRequest, apiError{Type: "bad_path",
			Message: "the path must not contain \"..\": it could leave the upstream's base path"})
		return
	}
	// Refused before its body is read, unless calls of the agent still in
	// flight explain it: then the ledger refuses it, saying so.
	if e := g.ledger.Known(agent, g.budgets[agent]); e.Limit() > 0 && e.Spent >= e.Limit() && g.ledger.Pending(agent) == 0 {
		g.accessLog(agent, name, r, http.StatusTooManyRequests, start, nil, "")
		refuseBudget(w, agent, ledger.Admission{Limit: e.Limit(), Used: e.Spent, Reset: e.Reset}, 0)
		return
	}
	c := &call{agent: agent, up: up, rest: rest}
	// Matched on the upstream's own path: its base URL's path and the rest
	// (/openai/v1/chat/completions and an upstream at …/v1 with
	// /openai/chat/completions are the same endpoint).
	unescaped, _ := url.PathUnescape(rest) // hasDotDot refused what does not unescape
	e, ok := endpointOf(up.api, up.prices, r.Method, path.Join("/", up.url.Path, unescaped))
	if !ok {
		g.accessLog(agent, name, r, http.StatusForbidden, start, nil, "")
		writeError(w, http.StatusForbidden, apiError{Type: "endpoint_not_allowed",
			Message: fmt.Sprintf("%s %s is not an endpoint the gateway meters on a %s upstream, so it is not forwarded: %s", r.Method, r.URL.Path, up.api, allowedOf(up.api))})
		return
	}
	if e.meter == flat {
		adm, ok := g.reserve(w, r, c, e.price, 0, start)
		if !ok {
			return
		}
		c.bound, c.reserved, c.res, c.flat = e.price, true, adm.Reservation, true
	}
	if e.meter == metered {
		// Held whole while it is read, bounded and forwarded: against the
		// gateway's memory, each agent may hold a share of what it has.
		held := int64(maxRequestBody)
		if r.ContentLength >= 0 && r.ContentLength <= maxRequestBody {
			held = r.ContentLength
		}
		release, ok := g.buffers.acquire(agent, bodyCost(held))
		if !ok {
			g.accessLog(agent, name, r, http.StatusServiceUnavailable, start, nil, "")
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, apiError{Type: "overloaded_error", retry: true,
				Message: "the gateway holds as many request bodies as its memory allows: retry"})
			return
		}
		defer release()
		raw, ref := readBody(r.Body)
		if ref == nil && int64(len(raw)) > held { // a body longer than it said: the server refuses that first
			ref = &refusal{http.StatusBadRequest, apiError{Type: "invalid_request_error", Message: "the body is longer than its Content-Length"}}
		}
		var p *prepared
		if ref == nil {
			p, ref = prepare(e, raw, g.outCap, up.prices)
		}
		if ref != nil {
			g.accessLog(agent, name, r, ref.status, start, nil, "")
			writeError(w, ref.status, ref.err)
			return
		}
		// An output cap of the gateway's own may shrink to fit what is left
		// of the budget, down to minFit: the call goes on with a smaller
		// answer rather than being refused for a cap it never asked for.
		var least int64
		if p.capWritten && g.budgets[agent].Tokens > 0 {
			least = min(g.minFit, p.outCap)*p.choices + p.fixed
		}
		adm, ok := g.reserve(w, r, c, p.bound, least, start)
		if !ok {
			return
		}
		if adm.Bound < p.bound {
			fitted := (adm.Bound - p.fixed) / p.choices
			if p, ref = prepare(e, raw, fitted, up.prices); ref != nil { // it passed once: it cannot fail
				g.ledger.Settle(adm.Reservation, 0)
				g.accessLog(agent, name, r, ref.status, start, nil, "")
				writeError(w, ref.status, ref.err)
				return
			}
			for i, n := range p.notes {
				if n == e.capField+" set to the gateway's default" {
					p.notes[i] = fmt.Sprintf("%s set to %d to fit what is left of the budget", e.capField, fitted)
				}
			}
		}
		c.bound, c.reserved, c.res, c.notes, c.tools = p.bound, true, adm.Reservation, p.notes, p.tools
		r.Body = io.NopCloser(bytes.NewReader(p.body))
		r.ContentLength = int64(len(p.body))
		r.Header.Set("Content-Length", strconv.Itoa(len(p.body)))
	}
	defer func() {
		// The proxy aborts a response cut short with a panic; what was seen
		// of it is still charged and logged before the panic goes on.
		p := recover()
		g.finish(c, r, start, p != nil)
		if p != nil {
			panic(p)
		}
	}()
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
}

// reserve holds bound (or, with least > 0, what is left of the budget down
// to least) against the call's agent's budget, or answers the request
// itself: 429 when the budget is spent, 503 when the ledger cannot be
// reached (a call is never forwarded unmetered).
func (g *Handler) reserve(w http.ResponseWriter, r *http.Request, c *call, bound, least int64, start time.Time) (ledger.Admission, bool) {
	adm, err := g.ledger.ReserveUpTo(r.Context(), c.agent, g.budgets[c.agent], bound, least)
	switch {
	case err != nil:
		g.log.Warn("refused: the ledger cannot be reached", "agent", c.agent, "err", err.Error())
		g.accessLog(c.agent, c.up.name, r, http.StatusServiceUnavailable, start, nil, "")
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, apiError{Type: "ledger_unavailable", retry: true,
			Message: "the gateway cannot record what the call would cost (the bus is unreachable), so it does not forward it: retry"})
		return ledger.Admission{}, false
	case !adm.OK:
		g.accessLog(c.agent, c.up.name, r, http.StatusTooManyRequests, start, nil, "")
		refuseBudget(w, c.agent, adm, least)
		return ledger.Admission{}, false
	}
	return adm, true
}
