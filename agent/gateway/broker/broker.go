// Package broker is the gateway's way out for agents' own work: a proxy
// that brokers each allowed host. For a brokered host it terminates the
// agent's TLS with a leaf certificate from the flock's egress CA, checks
// every request's method and path against the host's rule, strips whatever
// credential the agent sent, puts in the operator's, and forwards the
// request over TLS it verifies against the system roots, to an address
// netguard checked. A host marked a blind tunnel is spliced unread; any
// other host is refused. The broker follows no redirect: the agent's next
// request is checked as any other.
package broker

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/netguard"
	"github.com/ai-flock/ai-flock/agent/ledger"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
	"github.com/ai-flock/ai-flock/protocol/egressca"
)

// Bounds of what an agent sends the broker.
const (
	MaxHeaderBytes = 32 << 10
	// IdleTimeout ends a brokered connection no request used for that long.
	IdleTimeout = 90 * time.Second
	// HeaderTimeout bounds the wait for a request's head.
	HeaderTimeout = 30 * time.Second
)

// agentCredentials are stripped from every brokered request, whatever the
// rule: what the agent holds never reaches an upstream as a credential.
var agentCredentials = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key"}

// methodOverrides would make a server read another method than the one
// checked.
var methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// Config is the broker's configuration.
type Config struct {
	Rules *rules.Set
	// CA issues the leaves the broker shows agents; nil: brokered hosts are
	// refused (tunnels still work).
	CA *egressca.CA
	// Guard dials upstreams; nil: netguard.New(nil).
	Guard *netguard.Guard
	// Credential returns the value of a rule's credential.
	Credential func(*rules.Rule) string
	// Roots verify upstreams; nil: the system's.
	Roots *x509.CertPool
	// Ledger keeps the rules' byte budgets (protocol.EgressLedgerKey); nil: a ledger in
	// memory, this gateway's alone.
	Ledger ledger.Ledger
	// OnConnection, if set, gets a record of each connection when it ends.
	OnConnection func(Connection)
	Logger       *slog.Logger
}

// Connection is what one agent connection to one host did: the unit of the
// broker's log, metrics and audit (never one record per request).
type Connection struct {
	Agent string
	Host  string // host:port, as the agent asked for it
	// Rule is the key of the rule that served it ("*.example.com:443"),
	// "" when none did: a bounded name for metrics, where Host is any name
	// an agent chose.
	Rule     string
	Kind     string // "brokered", "tunnel", "plain" or "refused"
	Requests int64
	Refused  int64
	Sent     int64 // bytes of request bodies (a tunnel: every byte) agent → upstream
	Received int64 // bytes of response bodies upstream → agent
	Statuses map[int]int64
	Refusals []Refusal
	Duration time.Duration
}

// Refusal is one refused request, as the operator reviews it.
type Refusal struct {
	Method, Path, Why string
	Suggest           *rules.Rule // the rule that would have allowed it, if one could
}

// Broker serves agents' CONNECT and plain-HTTP proxy requests.
type Broker struct {
	cfg   Config
	log   *slog.Logger
	guard *netguard.Guard
	tr    map[*rules.Rule]*http.Transport
	led   ledger.Ledger
	rates rates
}

// New returns the broker of cfg.
func New(cfg Config) (*Broker, error) {
	if cfg.Rules == nil {
		return nil, errors.New("egress: no rules")
	}
	b := &Broker{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), guard: cfg.Guard, tr: map[*rules.Rule]*http.Transport{}}
	if b.guard == nil {
		b.guard = netguard.New(nil)
	}
	if b.led = cfg.Ledger; b.led == nil {
		b.led = ledger.NewMemory()
	}
	roots := cfg.Roots
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("egress: the system's roots: %w", err)
		}
	}
	for _, r := range cfg.Rules.Rules() {
		if r.Tunnel {
			continue
		}
		pool := roots
		if r.Roots != "" {
			pool = roots.Clone()
			if !pool.AppendCertsFromPEM([]byte(r.Roots)) {
				return nil, fmt.Errorf("egress: the roots of %s do not parse", r.Key())
			}
		}
		b.tr[r] = b.transport(r, pool)
	}
	return b, nil
}

func (b *Broker) transport(r *rules.Rule, pool *x509.CertPool) *http.Transport {
	allowed := r.PrivateAllowed()
	return &http.Transport{
		Proxy: nil, // the broker is the last proxy
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			p, _ := strconv.Atoi(port)
			return b.guard.Dial(ctx, host, p, allowed)
		},
		TLSClientConfig:        &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        IdleTimeout,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  5 * time.Minute,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// refusal is the body of a refused request: who asked what, and the rule
// that is missing.
type refusal struct {
	Type    string      `json:"type"`
	Agent   string      `json:"agent"`
	Host    string      `json:"host"`
	Method  string      `json:"method,omitempty"`
	Path    string      `json:"path,omitempty"`
	Message string      `json:"message"`
	Suggest *rules.Rule `json:"suggest,omitempty"`
}

func writeRefusal(w http.ResponseWriter, status int, f refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Type  string  `json:"type"`
		Error refusal `json:"error"`
	}{"error", f})
}

// splitHostPort is a CONNECT target or a proxy request's host, with the
// default port when it names none.
func splitHostPort(hp string, def int) (string, int, bool) {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		if strings.Contains(hp, ":") && !strings.HasPrefix(hp, "[") {
			return "", 0, false
		}
		return rules.NormalHost(strings.Trim(hp, "[]")), def, hp != ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || host == "" {
		return "", 0, false
	}
	return rules.NormalHost(host), p, true
}

// Connect serves CONNECT host:port for agent: a brokered host is served
// inside the agent's TLS, a tunnel host spliced, any other refused (403).
func (b *Broker) Connect(w http.ResponseWriter, r *http.Request, agent string) {
	start := time.Now()
	host, port, ok := splitHostPort(r.Host, 0)
	if !ok || port == 0 {
		writeRefusal(w, http.StatusBadRequest, refusal{Type: "connect_refused", Agent: agent, Host: r.Host,
			Message: fmt.Sprintf("CONNECT needs host:port (got %q)", r.Host)})
		return
	}
	rule := b.cfg.Rules.Lookup(agent, host, port)
	target := net.JoinHostPort(host, strconv.Itoa(port))
	if rule == nil || rule.PlainHTTP {
		s := rules.Suggest(agent, host, port, "GET", "/")
		b.done(Connection{Agent: agent, Host: target, Kind: "refused", Refused: 1, Duration: time.Since(start),
			Refusals: []Refusal{{Method: "CONNECT", Path: "", Why: "no rule", Suggest: &s}}})
		writeRefusal(w, http.StatusForbidden, refusal{Type: "connect_refused", Agent: agent, Host: target, Method: "CONNECT",
			Message: fmt.Sprintf("agent %s may not reach %s: no egress rule names it for this agent", agent, target)})
		return
	}
	if !rule.Tunnel && b.cfg.CA == nil {
		writeRefusal(w, http.StatusForbidden, refusal{Type: "connect_refused", Agent: agent, Host: target, Method: "CONNECT",
			Message: "the gateway has no egress CA: brokered hosts are refused"})
		return
	}
	var up net.Conn
	if rule.Tunnel { // dialed before the 200, so a refused address is a 403 the agent reads
		var err error
		if up, err = b.guard.Dial(r.Context(), host, port, rule.PrivateAllowed()); err != nil {
			b.refuseDial(w, agent, target, rule.Key(), err, start)
			return
		}
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		if up != nil {
			up.Close()
		}
		writeRefusal(w, http.StatusHTTPVersionNotSupported, refusal{Type: "connect_unsupported", Agent: agent, Host: target,
			Message: "CONNECT needs HTTP/1.1"})
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		if up != nil {
			up.Close()
		}
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		conn.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	client := &bufferedConn{Conn: conn, r: brw.Reader}
	if rule.Tunnel {
		sent, received := splice(client, up)
		b.done(Connection{Agent: agent, Host: target, Rule: rule.Key(), Kind: "tunnel", Sent: sent, Received: received, Duration: time.Since(start)})
		return
	}
	c := b.serveTLS(client, agent, host, port, rule)
	c.Duration = time.Since(start)
	b.done(c)
}

func (b *Broker) refuseDial(w http.ResponseWriter, agent, target, ruleKey string, err error, start time.Time) {
	var re *netguard.RefusedError
	status, typ := http.StatusBadGateway, "upstream_unreachable"
	msg := fmt.Sprintf("could not reach %s", target)
	if errors.As(err, &re) {
		status, typ, msg = http.StatusForbidden, "private_address", re.Error()
	}
	b.done(Connection{Agent: agent, Host: target, Rule: ruleKey, Kind: "refused", Refused: 1, Duration: time.Since(start),
		Refusals: []Refusal{{Method: "CONNECT", Why: msg}}})
	writeRefusal(w, status, refusal{Type: typ, Agent: agent, Host: target, Method: "CONNECT", Message: msg})
}

func (b *Broker) done(c Connection) {
	attrs := []any{"agent", c.Agent, "host", c.Host, "kind", c.Kind, "requests", c.Requests, "refused", c.Refused,
		"bytes_sent", c.Sent, "bytes_received", c.Received, "duration_ms", c.Duration.Milliseconds()}
	if len(c.Refusals) > 0 {
		last := c.Refusals[len(c.Refusals)-1]
		attrs = append(attrs, "last_refusal", last.Method+" "+last.Path+": "+last.Why)
	}
	b.log.Info("egress", attrs...)
	if b.cfg.OnConnection != nil {
		b.cfg.OnConnection(c)
	}
}

// bufferedConn reads first what the server's reader already holds.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// splice copies both ways until both sides end.
func splice(a, b net.Conn) (aToB, bToA int64) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		aToB, _ = io.Copy(b, a)
		closeWrite(b)
	}()
	go func() {
		defer wg.Done()
		bToA, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	wg.Wait()
	a.Close()
	b.Close()
	return aToB, bToA
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	if bc, ok := c.(*bufferedConn); ok {
		closeWrite(bc.Conn)
		return
	}
	c.Close()
}

// counter counts the bytes through a body.
type counter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c counter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
