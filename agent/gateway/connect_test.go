package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoListener echoes every connection on loopback and counts them.
func echoListener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String(), accepted
}

// connect sends CONNECT target to the gateway on a raw connection and returns
// the response and the connection, positioned after the response's head.
func connectTo(t *testing.T, gwURL, target string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	u, _ := url.Parse(gwURL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return resp, c, br
}

func TestConnectTunnelsToAnAllowedHost(t *testing.T) {
	echo, accepted := echoListener(t)
	tg := newTestGateway(t, func(c *Config) { c.AllowConnect = map[string][]string{"agent-1": {echo}} })
	resp, c, br := connectTo(t, tg.url, echo)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", echo, resp.Status)
	}
	for _, msg := range []string{"hello through the tunnel\n", "and back again\n"} {
		io.WriteString(c, msg)
		got, err := br.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo: %q %v, want %q", got, err, msg)
		}
	}
	if accepted.Load() != 1 {
		t.Errorf("echo accepted %d connections", accepted.Load())
	}
	// Closing our side ends the tunnel and it is logged, with its size.
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, br)
	waitFor(t, func() bool { return strings.Contains(tg.logs.String(), `"msg":"tunnel"`) }, "the tunnel's log line")
	if !strings.Contains(tg.logs.String(), `"bytes_sent":40`) {
		t.Errorf("tunnel log: %s", tg.logs.String())
	}
	if tg.gw.Spent("agent-1") != 0 {
		t.Errorf("a tunnel was charged")
	}
}

func TestConnectRefusedOutsideTheAllowList(t *testing.T) {
	echo, accepted := echoListener(t)
	other, otherAccepted := echoListener(t)
	tg := newTestGateway(t, func(c *Config) {
		c.AllowConnect = map[string][]string{"agent-1": {other}, "agent-2": {echo}}
	})
	resp, _, _ := connectTo(t, tg.url, echo) // agent-2's, not agent-1's
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT outside the allow-list: %s", resp.Status)
	}
	e := errorBody(t, string(body))
	if e["type"] != "connect_refused" || e["host"] != echo || !strings.Contains(e["message"].(string), echo) {
		t.Errorf("refusal does not name the host: %s", body)
	}
	time.Sleep(50 * time.Millisecond)
	if accepted.Load() != 0 || otherAccepted.Load() != 0 {
		t.Errorf("a refused CONNECT reached a listener")
	}
	// Same host, other port: refused too.
	_, port, _ := net.SplitHostPort(other)
	if resp, _, _ := connectTo(t, tg.url, "localhost:"+port); resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT localhost:%s (allowed as 127.0.0.1 only): %s", port, resp.Status)
	}
}

// A stock client with the gateway as its HTTPS proxy reaches an allowed TLS
// server through the tunnel.
func TestConnectAsHTTPSProxy(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "over TLS")
	}))
	t.Cleanup(tlsSrv.Close)
	target := strings.TrimPrefix(tlsSrv.URL, "https://")
	tg := newTestGateway(t, func(c *Config) { c.AllowConnect = map[string][]string{"agent-1": {target}} })
	proxy, _ := url.Parse(tg.url)
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxy)
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	resp, err := client.Get(tlsSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "over TLS" {
		t.Fatalf("through the proxy: %q", b)
	}
	tr.CloseIdleConnections()
	tg2 := newTestGateway(t, nil) // nothing allowed
	proxy2, _ := url.Parse(tg2.url)
	tr.Proxy = http.ProxyURL(proxy2)
	if _, err := client.Get(tlsSrv.URL); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("through a gateway that allows nothing: %v", err)
	}
}

func TestAllowRules(t *testing.T) {
	g := &Handler{allow: map[string][]allowRule{"agent-1": {
		parseAllowRule("*.Example.com:443"), parseAllowRule("api.anthropic.com:443"), parseAllowRule("[::1]:8443"),
	}}}
	for target, want := range map[string]bool{
		"api.example.com:443":      true,
		"a.b.example.com:443":      true,
		"API.EXAMPLE.COM.:443":     true,
		"example.com:443":          false, // the wildcard is for names under it
		"evilexample.com:443":      false,
		"api.example.com:80":       false,
		"api.example.com.evil:443": false,
		"api.anthropic.com:443":    true,
		"x.api.anthropic.com:443":  false,
		"[::1]:8443":               true,
		"api.anthropic.com":        false,
	} {
		if got := g.allowed("agent-1", target); got != want {
			t.Errorf("agent-1 CONNECT %s: %v, want %v", target, got, want)
		}
		if g.allowed("agent-2", target) {
			t.Errorf("agent-2 (no list) allowed %s", target)
		}
	}
}
