package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/agent/gateway/netguard"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
)

// echoListener echoes every connection on loopback and counts them.
func echoListener(t *testing.T) (port int, accepted *atomic.Int64) {
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
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

// loopbackNames resolves every name to 127.0.0.1: the test's "internet".
type loopbackNames struct{}

func (loopbackNames) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".invalid") {
		return nil, errors.New("no such host")
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// withEgress gives the test gateway a broker enforcing rs (agents agent-1
// and agent-2), its log the gateway's.
func withEgress(t *testing.T, rs ...rules.Rule) func(*Config) {
	return func(c *Config) {
		checked, errs := rules.Check(rs, rules.Context{Key: "egress", Agents: []string{"agent-1", "agent-2"}, Gateway: true})
		if errs != nil {
			t.Fatal(errs)
		}
		b, err := broker.New(broker.Config{Rules: rules.NewSet(checked), Guard: netguard.New(loopbackNames{}), Logger: c.Logger})
		if err != nil {
			t.Fatal(err)
		}
		c.Egress = b
	}
}

// connectTo sends CONNECT target to the gateway on a raw connection and
// returns the response and the connection, positioned after the response's
// head.
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

var loopback = []string{"127.0.0.0/8"}

func TestConnectTunnelsToATunnelRule(t *testing.T) {
	port, accepted := echoListener(t)
	tg := newTestGateway(t, withEgress(t, rules.Rule{Host: "echo.example", Port: port, Tunnel: true, PrivateRanges: loopback, Agents: []string{"agent-1"}}))
	target := "echo.example:" + strconv.Itoa(port)
	resp, c, br := connectTo(t, tg.url, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
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
	// While the tunnel is open it holds one of agent-1's places in flight.
	if n := tg.gw.inFlightOf("agent-1"); n != 1 {
		t.Errorf("in flight during a tunnel: %d, want 1", n)
	}
	// Closing our side ends the tunnel and it is logged, with its size.
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, br)
	waitFor(t, func() bool { return strings.Contains(tg.logs.String(), `"kind":"tunnel"`) }, "the tunnel's log line")
	if !strings.Contains(tg.logs.String(), `"bytes_sent":40`) {
		t.Errorf("tunnel log: %s", tg.logs.String())
	}
	waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 }, "the tunnel's place in flight given back")
	if tg.gw.Spent("agent-1") != 0 {
		t.Errorf("a tunnel was charged")
	}
}

// Refused: a host no rule names for the caller, another port of it, a
// tunnel whose name resolves to a private address no rule names, and any
// CONNECT at all through a gateway without egress rules. None reaches a
// listener.
func TestConnectRefusals(t *testing.T) {
	port, accepted := echoListener(t)
	p := strconv.Itoa(port)
	tg := newTestGateway(t, withEgress(t,
		rules.Rule{Host: "theirs.example", Port: port, Tunnel: true, PrivateRanges: loopback, Agents: []string{"agent-2"}},
		rules.Rule{Host: "private.example", Port: port, Tunnel: true},
	))
	for target, want := range map[string]string{
		"theirs.example:" + p:  "connect_refused", // agent-2's, not agent-1's
		"theirs.example:1":     "connect_refused",
		"private.example:" + p: "private_address",
		"127.0.0.1:" + p:       "connect_refused",
	} {
		resp, _, _ := connectTo(t, tg.url, target)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %s, want 403", target, resp.Status)
			continue
		}
		e := errorBody(t, string(body))
		if e["type"] != want || e["agent"] != "agent-1" || !strings.Contains(e["host"].(string), strings.Split(target, ":")[0]) {
			t.Errorf("CONNECT %s: %s, want a %s naming the agent and host", target, body, want)
		}
	}
	none := newTestGateway(t, nil)
	resp, _, _ := connectTo(t, none.url, "echo.example:"+p)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "flock:gateway.egress") {
		t.Errorf("CONNECT through a gateway without egress rules: %s %s", resp.Status, body)
	}
	time.Sleep(50 * time.Millisecond)
	if accepted.Load() != 0 {
		t.Errorf("a refused CONNECT reached the listener %d times", accepted.Load())
	}
}

// A stock client with the gateway as its HTTPS proxy reaches a TLS server
// through a tunnel rule; through a gateway without it, it is refused.
func TestConnectAsHTTPSProxy(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "over TLS")
	}))
	t.Cleanup(tlsSrv.Close)
	port := tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	tg := newTestGateway(t, withEgress(t, rules.Rule{Host: "example.com", Port: port, Tunnel: true, PrivateRanges: loopback}))
	proxy, _ := url.Parse(tg.url)
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxy)
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	target := "https://example.com:" + strconv.Itoa(port) + "/"
	resp, err := client.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "over TLS" {
		t.Fatalf("through the proxy: %q", b)
	}
	tr.CloseIdleConnections()
	tg2 := newTestGateway(t, nil)
	proxy2, _ := url.Parse(tg2.url)
	tr.Proxy = http.ProxyURL(proxy2)
	if _, err := client.Get(target); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("through a gateway without egress rules: %v", err)
	}
}

// A plain-HTTP proxy request (absolute-form) without a rule is the
// broker's refusal, not a model call.
func TestAbsoluteFormGoesToTheBroker(t *testing.T) {
	tg := newTestGateway(t, withEgress(t, rules.Rule{Host: "pkgs.example", PlainHTTP: true}))
	u, _ := url.Parse(tg.url)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET http://other.example/x HTTP/1.1\r\nHost: other.example\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "other.example") {
		t.Errorf("absolute-form to a host without a rule: %s %s", resp.Status, body)
	}
	if len(tg.up.requests()) != 0 {
		t.Errorf("the model upstream was called")
	}
}
