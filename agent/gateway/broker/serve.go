package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/netguard"
	"github.com/ai-flock/ai-flock/protocol"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
)

// session is one agent connection to one host, and what it did.
type session struct {
	agent  string
	host   string // lower case
	port   int
	scheme string // of the upstream: "https" or "http"
	rule   *rules.Rule

	sent, received atomic.Int64
	mu             sync.Mutex
	c              Connection
}

// maxRefusalsKept bounds what a connection keeps of its refusals for the
// operator (the count is whole).
const maxRefusalsKept = 8

func (s *session) refused(method, path, why string, suggest *rules.Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.Refused++
	if len(s.c.Refusals) < maxRefusalsKept {
		s.c.Refusals = append(s.c.Refusals, Refusal{Method: method, Path: path, Why: why, Suggest: suggest})
	}
}

func (s *session) status(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c.Statuses == nil {
		s.c.Statuses = map[int]int64{}
	}
	s.c.Statuses[code]++
}

func (s *session) record(kind string) Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.Agent, c.Host, c.Kind = s.agent, net.JoinHostPort(s.host, strconv.Itoa(s.port)), kind
	if s.rule != nil {
		c.Rule = s.rule.Key()
	}
	c.Sent, c.Received = s.sent.Load(), s.received.Load()
	return c
}

// serveTLS terminates the agent's TLS to host with a leaf of the flock's CA
// and serves the HTTP/1.1 requests inside it, each checked.
func (b *Broker) serveTLS(client net.Conn, agent, host string, port int, rule *rules.Rule) Connection {
	s := &session{agent: agent, host: host, port: port, scheme: "https", rule: rule}
	tc := tls.Server(client, &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only: each request is read and checked on its own.
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if sni := rules.NormalHost(hello.ServerName); sni != "" && sni != host {
				s.refused("CONNECT", "", fmt.Sprintf("the TLS name %q is not the CONNECT's %q", sni, host), nil)
				return nil, fmt.Errorf("egress: SNI %q is not the CONNECT host %q", sni, host)
			}
			return b.cfg.CA.Leaf(host)
		},
	})
	_ = tc.SetDeadline(time.Now().Add(HeaderTimeout))
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return s.record("refused")
	}
	_ = tc.SetDeadline(time.Time{})
	ln := newOneConnListener(tc)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.serveRequest(w, r, s) }),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.finish()
			}
		},
	}
	srv.SetKeepAlivesEnabled(true)
	_ = srv.Serve(ln)
	return s.record("brokered")
}

// Forward serves a plain-HTTP proxy request (absolute-form, from an agent's
// HTTP_PROXY) to a host whose rule has plainHttp.
func (b *Broker) Forward(w http.ResponseWriter, r *http.Request, agent string) {
	start := time.Now()
	if r.URL.Scheme != "http" {
		writeRefusal(w, http.StatusBadRequest, refusal{Type: "proxy_request_refused", Agent: agent, Host: r.URL.Host,
			Message: fmt.Sprintf("a proxy request must be http:// (got %q): HTTPS goes through CONNECT", r.URL.Scheme)})
		return
	}
	host, port, ok := splitHostPort(r.URL.Host, rules.DefaultPlainPort)
	if !ok {
		writeRefusal(w, http.StatusBadRequest, refusal{Type: "proxy_request_refused", Agent: agent, Host: r.URL.Host,
			Message: fmt.Sprintf("the request's host does not parse (%q)", r.URL.Host)})
		return
	}
	rule := b.cfg.Rules.Lookup(agent, host, port)
	s := &session{agent: agent, host: host, port: port, scheme: "http", rule: rule}
	if rule == nil || !rule.PlainHTTP {
		s.c.Requests++
		rawPath, _ := absolutePath(r.RequestURI)
		sug := rules.Suggest(agent, host, port, r.Method, rawPath)
		sug.PlainHTTP = true
		s.refused(r.Method, rawPath, "no plain-HTTP rule", &sug)
		writeRefusal(w, http.StatusForbidden, refusal{Type: "egress_refused", Agent: agent, Host: net.JoinHostPort(host, strconv.Itoa(port)),
			Method: r.Method, Path: rawPath, Suggest: &sug,
			Message: fmt.Sprintf("agent %s may not reach http://%s: no plain-HTTP egress rule names it for this agent", agent, r.URL.Host)})
	} else {
		b.serveRequest(w, r, s)
	}
	c := s.record("plain")
	c.Duration = time.Since(start)
	b.done(c)
}

// absolutePath is the escaped path and raw query of a request-target as
// sent: origin-form "/p?q", or absolute-form "http://host/p?q".
func absolutePath(target string) (path, query string) {
	if !strings.HasPrefix(target, "/") {
		if i := strings.Index(target, "://"); i >= 0 {
			rest := target[i+3:]
			j := strings.IndexAny(rest, "/?")
			if j < 0 {
				return "/", ""
			}
			target = rest[j:]
			if strings.HasPrefix(target, "?") {
				target = "/" + target
			}
		}
	}
	path, query, _ = strings.Cut(target, "?")
	return path, query
}

// serveRequest checks one request against the session's rule and forwards it.
func (b *Broker) serveRequest(w http.ResponseWriter, r *http.Request, s *session) {
	s.mu.Lock()
	s.c.Requests++
	s.mu.Unlock()
	target := net.JoinHostPort(s.host, strconv.Itoa(s.port))
	rawPath, rawQuery := absolutePath(r.RequestURI)
	refuse := func(status int, typ, why string, suggest *rules.Rule) {
		s.refused(r.Method, rawPath, why, suggest)
		s.status(status)
		writeRefusal(w, status, refusal{Type: typ, Agent: s.agent, Host: target, Method: r.Method, Path: rawPath, Message: why, Suggest: suggest})
	}
	if s.scheme == "https" && !strings.HasPrefix(r.RequestURI, "/") {
		refuse(http.StatusBadRequest, "egress_refused", "inside a brokered connection a request names its path only (origin-form), not a URL", nil)
		return
	}
	if h, p, ok := splitHostPort(r.Host, s.port); !ok || h != s.host || p != s.port {
		refuse(http.StatusMisdirectedRequest, "egress_refused", fmt.Sprintf("the request's Host %q is not the connection's %s", r.Host, target), nil)
		return
	}
	for _, h := range methodOverrides {
		if _, ok := r.Header[h]; ok {
			refuse(http.StatusForbidden, "egress_refused", fmt.Sprintf("%s would have the server read another method than the one checked: refused whatever the rules", h), nil)
			return
		}
	}
	if up := r.Header.Get("Upgrade"); up != "" || headerHasToken(r.Header, "Connection", "upgrade") {
		if up == "" || !s.rule.UpgradeAllowed(up) {
			refuse(http.StatusForbidden, "egress_refused", fmt.Sprintf("Upgrade %q is refused: after a switch of protocol the connection is blind; a rule allows it by name (upgrade: [%s])", up, strings.ToLower(up)), nil)
			return
		}
	}
	if ok, why := s.rule.Allows(r.Method, rawPath, rawQuery); !ok {
		sug := rules.Suggest(s.agent, s.host, s.port, r.Method, rawPath)
		if rules.CanonicalPath(rawPath) != "" {
			refuse(http.StatusBadRequest, "egress_refused", why, nil)
			return
		}
		refuse(http.StatusForbidden, "egress_refused", fmt.Sprintf("agent %s: %s", s.agent, why), &sug)
		return
	}
	if ok, wait := b.rates.allow(s.agent, s.rule); !ok {
		w.Header().Set("Retry-After", retryAfter(wait))
		refuse(http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("agent %s: past the %d requests a minute rule %s allows", s.agent, s.rule.RequestsPerMinute, s.rule.Key()), nil)
		return
	}
	if max := s.rule.MaxRequestBytes; max > 0 && r.ContentLength > max {
		refuse(http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("the request's body is %d bytes, past the %d bytes (maxRequestBytes) rule %s allows", r.ContentLength, max, s.rule.Key()), nil)
		return
	}
	var m *meter
	if bud := s.rule.Budget; bud != nil {
		m = &meter{l: b.led, key: protocol.EgressLedgerKey(s.agent, s.rule.Key()), budget: ledgerBudget(bud)}
		if err := m.reserve(r.Context()); errors.Is(err, errBudget) {
			if !m.adm.Reset.IsZero() {
				w.Header().Set("Retry-After", retryAfter(time.Until(m.adm.Reset)))
			}
			refuse(http.StatusTooManyRequests, "egress_budget", m.refusal(s.agent, s.rule.Key()), nil)
			return
		} else if err != nil {
			refuse(http.StatusServiceUnavailable, "ledger_unavailable", fmt.Sprintf("the ledger keeping rule %s's budget could not be reached: %v", s.rule.Key(), err), nil)
			return
		}
		defer m.settle()
	}
	// A body cut at a bound or where the budget ran out is a refusal too.
	var cut sync.Once
	onCut := func(err error) {
		cut.Do(func() { s.refused(r.Method, rawPath, "cut: "+limitWhy(err, s, m), nil) })
	}
	for _, h := range agentCredentials {
		r.Header.Del(h)
	}
	if c := s.rule.Credential; c != nil {
		r.Header.Del(c.HeaderName())
		if v := b.cfg.Credential(s.rule); v != "" {
			if c.BasicUser != "" {
				r.SetBasicAuth(c.BasicUser, v)
			} else {
				r.Header.Set(c.Header, c.Prefix+v)
			}
		}
	}
	r.Body = counter{ReadCloser: &limitedBody{ReadCloser: r.Body, max: s.rule.MaxRequestBytes, tooLarge: errRequestSize, m: m, onCut: onCut}, n: &s.sent}
	tr := b.tr[s.rule]
	proxy := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = s.scheme
			pr.Out.URL.Host = target
			pr.Out.URL.Path, pr.Out.URL.RawPath = r.URL.Path, rawPath
			pr.Out.URL.RawQuery = rawQuery
			pr.Out.Host = s.host
			if s.port != defaultPort(s.scheme) {
				pr.Out.Host = target
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if max := s.rule.MaxResponseBytes; max > 0 && resp.ContentLength > max {
				resp.Body.Close()
				return fmt.Errorf("%w: %d bytes", errResponseSize, resp.ContentLength)
			}
			s.status(resp.StatusCode)
			resp.Body = counter{ReadCloser: &limitedBody{ReadCloser: resp.Body, max: s.rule.MaxResponseBytes, tooLarge: errResponseSize, m: m, onCut: onCut}, n: &s.received}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var re *netguard.RefusedError
			if errors.As(err, &re) {
				refuse(http.StatusForbidden, "private_address", re.Error(), nil)
				return
			}
			switch {
			case errors.Is(err, errRequestSize):
				refuse(http.StatusRequestEntityTooLarge, "request_too_large", limitWhy(err, s, m), nil)
				return
			case errors.Is(err, errResponseSize):
				refuse(http.StatusBadGateway, "response_too_large", limitWhy(err, s, m), nil)
				return
			case errors.Is(err, errBudget):
				refuse(http.StatusTooManyRequests, "egress_budget", limitWhy(err, s, m), nil)
				return
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			s.status(http.StatusBadGateway)
			writeRefusal(w, http.StatusBadGateway, refusal{Type: "upstream_unreachable", Agent: s.agent, Host: target,
				Method: r.Method, Path: rawPath, Message: fmt.Sprintf("could not reach %s: %v", target, scrub(err))})
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	proxy.ServeHTTP(w, r)
}

// limitWhy says which bound err is.
func limitWhy(err error, s *session, m *meter) string {
	switch {
	case errors.Is(err, errRequestSize):
		return fmt.Sprintf("the request's body passed the %d bytes (maxRequestBytes) rule %s allows", s.rule.MaxRequestBytes, s.rule.Key())
	case errors.Is(err, errResponseSize):
		return fmt.Sprintf("the response's body passed the %d bytes (maxResponseBytes) rule %s allows", s.rule.MaxResponseBytes, s.rule.Key())
	case errors.Is(err, errBudget) && m != nil:
		return m.refusal(s.agent, s.rule.Key())
	}
	return err.Error()
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return rules.DefaultPlainPort
	}
	return rules.DefaultPort
}

// scrub keeps a transport error's reason and drops the URL (its query).
func scrub(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if u := ue.Unwrap(); u != nil {
			return u
		}
	}
	return err
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// oneConnListener hands http.Server one connection, then blocks Accept
// until that connection is done, so Serve returns when it is.
type oneConnListener struct {
	conn net.Conn
	once sync.Once
	done chan struct{}
	used atomic.Bool
}

func newOneConnListener(c net.Conn) *oneConnListener {
	return &oneConnListener{conn: c, done: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.used.CompareAndSwap(false, true) {
		return l.conn, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) finish()        { l.once.Do(func() { close(l.done) }) }
func (l *oneConnListener) Close() error   { l.finish(); return nil }
func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
