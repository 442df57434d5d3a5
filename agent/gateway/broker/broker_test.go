package broker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/netguard"
	"github.com/ai-flock/ai-flock/agent/ledger"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
	"github.com/ai-flock/ai-flock/protocol/egressca"
)

const secret = "s3cret-credential"

type resolver map[string][]netip.Addr

func (f resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// rig is a broker in front of an upstream that plays the internet:
// httptest's TLS server, whose certificate names example.com, reached at
// 127.0.0.1 by a resolver of the test's own.
type rig struct {
	t        testing.TB
	upstream *httptest.Server
	proxy    *httptest.Server
	ca       *egressca.CA
	mu       sync.Mutex
	seen     []*http.Request // what the upstream received
	conns    []Connection
}

func newRig(t testing.TB, rs ...rules.Rule) *rig {
	t.Helper()
	return newRigLedger(t, nil, rs...)
}

// newRigLedger is newRig with the broker keeping budgets in led.
func newRigLedger(t testing.TB, led ledger.Ledger, rs ...rules.Rule) *rig {
	t.Helper()
	g := &rig{t: t}
	g.upstream = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.seen = append(g.seen, r.Clone(context.Background()))
		g.mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "https://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		case "/echo-headers":
			_ = r.Header.Write(w)
			return
		}
		if r.URL.Path == "/endless" { // 5 GiB, chunked, until the reader goes
			chunk := make([]byte, 64<<10)
			for sent := 0; sent < 5<<30; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
			return
		}
		// /bytes/N: N bytes with no length said up front (chunked);
		// /sized/N: N bytes with their Content-Length.
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			k, _ := strconv.Atoi(n)
			w.(http.Flusher).Flush()
			_, _ = w.Write(bytes.Repeat([]byte("x"), k))
			return
		}
		if n, ok := strings.CutPrefix(r.URL.Path, "/stream/"); ok { // N bytes, 64 KiB at a time, with their length
			k, _ := strconv.Atoi(n)
			w.Header().Set("Content-Length", n)
			chunk := make([]byte, 64<<10)
			for k > 0 {
				m, err := w.Write(chunk[:min(k, len(chunk))])
				if err != nil {
					return
				}
				k -= m
			}
			return
		}
		if n, ok := strings.CutPrefix(r.URL.Path, "/sized/"); ok {
			k, _ := strconv.Atoi(n)
			w.Header().Set("Content-Length", n)
			_, _ = w.Write(bytes.Repeat([]byte("x"), k))
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.RequestURI(), len(body))
	}))
	t.Cleanup(g.upstream.Close)
	port := g.upstream.Listener.Addr().(*net.TCPAddr).Port
	ctx := rules.Context{Key: "egress", Agents: []string{"agent-1", "agent-2"}, Gateway: true}
	for i := range rs {
		if rs[i].Port == 0 && !rs[i].PlainHTTP {
			rs[i].Port = port
		}
		if rs[i].Credential != nil {
			rs[i].Credential.File = "/run/secret"
		}
	}
	checked, errs := rules.Check(rs, ctx)
	if errs != nil {
		t.Fatal(errs)
	}
	ca, err := egressca.New(bytes.Repeat([]byte{7}, egressca.SeedSize), "test")
	if err != nil {
		t.Fatal(err)
	}
	g.ca = ca
	roots := x509.NewCertPool()
	roots.AddCert(g.upstream.Certificate())
	b, err := New(Config{
		Rules: rules.NewSet(checked), CA: ca, Roots: roots,
		Guard: netguard.New(resolver{
			"example.com":  {netip.MustParseAddr("127.0.0.1")},
			"private.test": {netip.MustParseAddr("127.0.0.1")},
		}),
		Credential:   func(*rules.Rule) string { return secret },
		Ledger:       led,
		OnConnection: func(c Connection) { g.mu.Lock(); g.conns = append(g.conns, c); g.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	g.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent := r.Header.Get("X-Test-Agent") // the gateway knows callers otherwise; here the test says
		if agent == "" {
			agent = "agent-1"
		}
		if r.Method == http.MethodConnect {
			b.Connect(w, r, agent)
			return
		}
		b.Forward(w, r, agent)
	}))
	t.Cleanup(g.proxy.Close)
	return g
}

func (g *rig) port() int { return g.upstream.Listener.Addr().(*net.TCPAddr).Port }

// client is an agent's HTTP client: the proxy from its environment, the
// flock's CA as its only root.
func (g *rig) client() *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(g.ca.Certificate())
	pu, _ := url.Parse(g.proxy.URL)
	return &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (g *rig) url(path string) string { return fmt.Sprintf("https://example.com:%d%s", g.port(), path) }

type refusalBody struct {
	Error refusal `json:"error"`
}

func readRefusal(t *testing.T, resp *http.Response) refusal {
	t.Helper()
	defer resp.Body.Close()
	var b refusalBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatalf("refusal body: %v", err)
	}
	return b.Error
}

func TestBrokerInjectsTheCredentialAndChecksEachRequest(t *testing.T) {
	g := newRig(t, rules.Rule{Host: "example.com", PrivateRanges: []string{"127.0.0.0/8"},
		Paths:      []string{"GET /org/*.git/info/refs?service=git-upload-pack", "POST /org/*.git/git-upload-pack", "GET /echo-headers", "GET /redirect"},
		Credential: &rules.Credential{Header: "Authorization", Prefix: "Bearer "}})
	c := g.client()

	req, _ := http.NewRequest("GET", g.url("/org/repo.git/info/refs?service=git-upload-pack"), nil)
	req.Header.Set("Authorization", "Bearer agent-made-this-up")
	req.Header.Set("Cookie", "session=agent")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" {
		t.Fatalf("allowed GET: %d %s %q", resp.StatusCode, resp.Proto, body)
	}
	g.mu.Lock()
	got := g.seen[0]
	g.mu.Unlock()
	if a := got.Header.Values("Authorization"); len(a) != 1 || a[0] != "Bearer "+secret {
		t.Fatalf("the upstream got Authorization %q, want the operator's credential alone", a)
	}
	if got.Header.Get("Cookie") != "" {
		t.Fatal("the agent's cookie reached the upstream")
	}

	// A push is refused, naming who asked what, with the rule that would allow it.
	resp, err = c.Post(g.url("/org/repo.git/git-receive-pack"), "application/x-git-receive-pack-request", strings.NewReader("pack"))
	if err != nil {
		t.Fatal(err)
	}
	f := readRefusal(t, resp)
	if resp.StatusCode != 403 || f.Agent != "agent-1" || f.Method != "POST" || f.Path != "/org/repo.git/git-receive-pack" ||
		!strings.Contains(f.Message, "example.com") || f.Suggest == nil {
		t.Fatalf("push: %d %+v", resp.StatusCode, f)
	}
	resp, _ = c.Get(g.url("/org/repo.git/info/refs?service=git-receive-pack"))
	if resp.StatusCode != 403 {
		t.Fatalf("push discovery: %d", resp.StatusCode)
	}
	resp.Body.Close()

	// The broker follows no redirect: the agent sees the 302, and its
	// next request (to the metadata address) is its own, refused.
	resp, err = c.Get(g.url("/redirect"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect: %d", resp.StatusCode)
	}
	resp, err = c.Get(resp.Header.Get("Location"))
	if err == nil {
		if resp.StatusCode != 403 {
			t.Fatalf("the metadata address: %d", resp.StatusCode)
		}
		resp.Body.Close()
	}

	// An upstream that echoes request headers shows the agent the
	// credential: the broker does not hide it (docs/security.md says so).
	resp, _ = c.Get(g.url("/echo-headers"))
	echo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(echo), secret) {
		t.Fatalf("the echo did not carry the credential; the docs' warning is wrong: %q", echo)
	}
	if g.upstreamRequests() != 3 {
		t.Fatalf("the upstream saw %d requests, want the 3 allowed", g.upstreamRequests())
	}
}

func (g *rig) upstreamRequests() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

// rawRequest sends raw bytes inside a brokered TLS connection and returns
// the status line.
func (g *rig) rawRequest(t *testing.T, sni, raw string) (string, error) {
	t.Helper()
	conn, err := net.Dial("tcp", g.proxy.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", g.port(), g.port())
	br := bufio.NewReader(conn)
	line, _ := br.ReadString('\n')
	if !strings.Contains(line, "200") {
		return line, nil
	}
	for l, _ := br.ReadString('\n'); l != "\r\n" && l != ""; l, _ = br.ReadString('\n') {
	}
	roots := x509.NewCertPool()
	roots.AddCert(g.ca.Certificate())
	tc := tls.Client(conn, &tls.Config{ServerName: sni, RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	if _, err := io.WriteString(tc, strings.ReplaceAll(raw, "PORT", fmt.Sprint(g.port()))); err != nil {
		return "", err
	}
	status, err := bufio.NewReader(tc).ReadString('\n')
	return strings.TrimSpace(status), err
}

func TestHostileRequestsInsideTheTunnel(t *testing.T) {
	g := newRig(t, rules.Rule{Host: "example.com", PrivateRanges: []string{"127.0.0.0/8"}, Paths: []string{"GET /ok", "GET /a/**"}})
	for _, c := range []struct {
		name, raw, want string
	}{
		{"allowed", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "200"},
		{"absolute-form", "GET https://evil.example/ok HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"other Host", "GET /ok HTTP/1.1\r\nHost: evil.example\r\n\r\n", "421"},
		{"duplicate Host", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nHost: evil.example\r\n\r\n", "400"},
		{"lower-case method", "get /ok HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "403"},
		{"method override", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nX-HTTP-Method-Override: DELETE\r\n\r\n", "403"},
		{"upgrade", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "403"},
		{"h2c", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n", "403"},
		{"encoded dot-dot", "GET /a/%2e%2e/admin HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"dot-dot", "GET /a/../admin HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"double slash", "GET /a//admin HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"semicolon", "GET /a/x;/admin HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"encoded slash", "GET /a%2fadmin HTTP/1.1\r\nHost: example.com:PORT\r\n\r\n", "400"},
		{"CRLF in a header", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nX-A: b\rInjected: c\r\n\r\n", "400"},
		{"over-long headers", "GET /ok HTTP/1.1\r\nHost: example.com:PORT\r\nX-Big: " + strings.Repeat("a", 2*MaxHeaderBytes) + "\r\n\r\n", "431"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, err := g.rawRequest(t, "example.com", c.raw)
			if err != nil || !strings.Contains(status, " "+c.want+" ") && !strings.HasSuffix(status, " "+c.want) {
				t.Fatalf("status %q (%v), want %s", status, err, c.want)
			}
		})
	}
	if n := g.upstreamRequests(); n != 1 {
		t.Fatalf("the upstream saw %d requests, want the 1 allowed", n)
	}
	// A TLS name other than the CONNECT's gets no certificate.
	if _, err := g.rawRequest(t, "evil.example", "GET /ok HTTP/1.1\r\nHost: evil.example\r\n\r\n"); err == nil {
		t.Fatal("a handshake for another name than the CONNECT's succeeded")
	}
}

func TestBrokerRefusesUnknownHostsAgentsAndPrivateAddresses(t *testing.T) {
	g := newRig(t,
		rules.Rule{Host: "example.com", Agents: []string{"agent-1"}, PrivateRanges: []string{"127.0.0.0/8"}},
		rules.Rule{Host: "private.test"}, // resolves to 127.0.0.1, with no range named
	)
	c := g.client()
	if resp, err := c.Get(fmt.Sprintf("https://other.example:%d/", g.port())); err == nil {
		resp.Body.Close()
		t.Fatalf("a host with no rule: %d, want the CONNECT refused", resp.StatusCode)
	}
	// A brokered host is dialed per request: its refusal is a 403 inside
	// the agent's TLS, naming the address.
	resp, err := c.Get(fmt.Sprintf("https://private.test:%d/", g.port()))
	if err != nil {
		t.Fatal(err)
	}
	if f := readRefusal(t, resp); resp.StatusCode != 403 || f.Type != "private_address" || !strings.Contains(f.Message, "127.0.0.1") {
		t.Fatalf("a private address: %d %+v", resp.StatusCode, f)
	}
	req, _ := http.NewRequest("GET", g.url("/"), nil)
	req.Header.Set("X-Test-Agent", "agent-2") // a CONNECT header, read by the rig only
	pu, _ := url.Parse(g.proxy.URL)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), ProxyConnectHeader: http.Header{"X-Test-Agent": {"agent-2"}},
		TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}
	if resp, err := (&http.Client{Transport: tr}).Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("agent-2 reached agent-1's host")
	}
	if g.upstreamRequests() != 0 {
		t.Fatal("a refused connection reached the upstream")
	}
	// A brokered connection is recorded when it ends: close the kept-alive
	// one and wait for its record, which may come after agent-2's.
	c.CloseIdleConnections()
	conns := g.waitConns(t, 3)
	kinds := map[string]int{}
	var refusedInBrokered int64
	for _, c := range conns {
		kinds[c.Kind]++
		if c.Kind == "brokered" {
			refusedInBrokered += c.Refused
		}
	}
	if kinds["refused"] != 2 || kinds["brokered"] != 1 || refusedInBrokered != 1 {
		t.Fatalf("connections recorded %v, want 2 refused and 1 brokered with its request refused", kinds)
	}
}

// waitConns waits up to 5 s for n connection records and returns them.
func (g *rig) waitConns(t *testing.T, n int) []Connection {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		conns := append([]Connection(nil), g.conns...)
		g.mu.Unlock()
		if len(conns) >= n || time.Now().After(deadline) {
			return conns
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTunnelRuleSplicesUnread(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	g := newRig(t, rules.Rule{Host: "example.com", Port: port, Tunnel: true, PrivateRanges: []string{"127.0.0.0/8"}})
	conn, err := net.Dial("tcp", g.proxy.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", port, port)
	br := bufio.NewReader(conn)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "200") {
		t.Fatalf("CONNECT: %q", line)
	}
	_, _ = br.ReadString('\n')
	io.WriteString(conn, "not http at all\n")
	if line, _ := br.ReadString('\n'); line != "not http at all\n" {
		t.Fatalf("echo: %q", line)
	}
}

func TestPlainHTTPNeedsAPlainRule(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain %s auth=%q", r.URL.Path, r.Header.Get("Authorization"))
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	g := newRig(t, rules.Rule{Host: "example.com", Port: port, PlainHTTP: true, PrivateRanges: []string{"127.0.0.0/8"}, Paths: []string{"/simple/**"}})
	c := g.client()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://example.com:%d/simple/pkg/", port), nil)
	req.SetBasicAuth("agent", "guess")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `plain /simple/pkg/ auth=""` {
		t.Fatalf("plain GET: %d %q", resp.StatusCode, body)
	}
	resp, _ = c.Get(fmt.Sprintf("http://example.com:%d/admin", port))
	if f := readRefusal(t, resp); resp.StatusCode != 403 || f.Path != "/admin" {
		t.Fatalf("plain /admin: %d %+v", resp.StatusCode, f)
	}
	resp, _ = c.Get(fmt.Sprintf("http://other.example:%d/simple/x", port))
	if resp.StatusCode != 403 {
		t.Fatalf("another host: %d", resp.StatusCode)
	}
	resp.Body.Close()
}
