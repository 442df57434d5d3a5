package broker

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
)

func limitedRule(f func(*rules.Rule)) rules.Rule {
	r := rules.Rule{Host: "example.com", PrivateRanges: []string{"127.0.0.0/8"}, Methods: []string{"GET", "POST"}}
	f(&r)
	return r
}

// A rule's rate: a minute's requests pass, the next is refused with 429
// and Retry-After, naming the rule; another agent has a rate of its own.
func TestBrokerRateLimitsEachAgent(t *testing.T) {
	g := newRig(t, limitedRule(func(r *rules.Rule) { r.RequestsPerMinute = 3 }))
	c := g.client()
	for i := 0; i < 3; i++ {
		resp, err := c.Get(g.url("/ok"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("request %d: %v %v", i+1, resp, err)
		}
		resp.Body.Close()
	}
	resp, err := c.Get(g.url("/ok"))
	if err != nil {
		t.Fatal(err)
	}
	ra := resp.Header.Get("Retry-After")
	if f := readRefusal(t, resp); resp.StatusCode != 429 || f.Type != "rate_limited" || !strings.Contains(f.Message, "3 requests a minute") || ra == "" {
		t.Fatalf("the 4th request: %d %+v (Retry-After %q)", resp.StatusCode, f, ra)
	}
	if n := g.upstreamRequests(); n != 3 {
		t.Fatalf("the upstream saw %d requests, want 3", n)
	}
	var rs rates
	r := limitedRule(func(r *rules.Rule) { r.RequestsPerMinute = 1 })
	if ok, _ := rs.allow("agent-1", &r); !ok {
		t.Fatal("agent-1's first request refused")
	}
	if ok, _ := rs.allow("agent-1", &r); ok {
		t.Fatal("agent-1's second request in the minute passed")
	}
	if ok, _ := rs.allow("agent-2", &r); !ok {
		t.Fatal("agent-2 was refused for agent-1's requests")
	}
}

// Size bounds: a body whose length is said and too large is refused before
// anything goes upstream; one whose length is not said is cut where it
// passes the bound, and the cut is recorded.
func TestBrokerBoundsBodies(t *testing.T) {
	g := newRig(t, limitedRule(func(r *rules.Rule) { r.MaxRequestBytes, r.MaxResponseBytes = 1000, 1000 }))
	c := g.client()
	resp, err := c.Post(g.url("/up"), "application/octet-stream", bytes.NewReader(make([]byte, 1001)))
	if err != nil {
		t.Fatal(err)
	}
	if f := readRefusal(t, resp); resp.StatusCode != 413 || f.Type != "request_too_large" || !strings.Contains(f.Message, "1001 bytes, past the 1000") {
		t.Fatalf("a 1001-byte upload: %d %+v", resp.StatusCode, f)
	}
	// Chunked: no length up front.
	resp, err = c.Post(g.url("/up"), "application/octet-stream", io.MultiReader(bytes.NewReader(make([]byte, 600)), bytes.NewReader(make([]byte, 600))))
	if err != nil {
		t.Fatal(err)
	}
	if f := readRefusal(t, resp); resp.StatusCode != 413 || f.Type != "request_too_large" {
		t.Fatalf("a chunked 1200-byte upload: %d %+v", resp.StatusCode, f)
	}
	resp, err = c.Post(g.url("/up"), "application/octet-stream", bytes.NewReader(make([]byte, 1000)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("an upload at the bound: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = c.Get(g.url("/sized/1001"))
	if err != nil {
		t.Fatal(err)
	}
	if f := readRefusal(t, resp); resp.StatusCode != 502 || f.Type != "response_too_large" {
		t.Fatalf("a 1001-byte download with its length: %d %+v", resp.StatusCode, f)
	}
	resp, err = c.Get(g.url("/bytes/5000"))
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil || len(b) > 1000 {
			t.Fatalf("a chunked 5000-byte download: read %d bytes, error %v; want it cut at 1000", len(b), rerr)
		}
	}
	// 5 GiB each way, neither said up front: each cut at the bound, at
	// once (nothing is buffered whole).
	start := time.Now()
	// (The client may see its write cut before it reads the 413.)
	if resp, err := c.Post(g.url("/up"), "application/octet-stream", io.LimitReader(zeros{}, 5<<30)); err == nil {
		if f := readRefusal(t, resp); resp.StatusCode != 413 || f.Type != "request_too_large" {
			t.Fatalf("a 5 GiB upload: %d %+v", resp.StatusCode, f)
		}
	}
	resp, err = c.Get(g.url("/endless"))
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil || n > 1000 {
			t.Fatalf("a 5 GiB download: read %d bytes, error %v; want it cut at 1000", n, rerr)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("cutting 5 GiB each way took %s: the bodies were read past their bound", d)
	}
	resp, err = c.Get(g.url("/bytes/1000"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 1000 {
		t.Fatalf("a download at the bound: %d bytes, %v", len(b), err)
	}
	resp.Body.Close()
	c.CloseIdleConnections()
	cuts := 0
	for _, conn := range g.waitConns(t, 1) {
		for _, f := range conn.Refusals {
			if strings.HasPrefix(f.Why, "cut: ") {
				cuts++
			}
		}
	}
	if cuts == 0 {
		t.Error("no connection recorded a body cut at its bound")
	}
}

// A byte budget: requests and responses draw on it both ways; past it a
// request is refused with 429 naming the budget; a second broker on the
// same ledger (a restarted gateway) continues from the same total; another
// agent has its own.
func TestBrokerByteBudget(t *testing.T) {
	led := ledger.NewMemory()
	rule := limitedRule(func(r *rules.Rule) { r.Budget = &rules.Budget{Bytes: 10_000, Window: rules.WindowDay} })
	g := newRigLedger(t, led, rule)
	c := g.client()
	for i := 0; i < 2; i++ {
		resp, err := c.Get(g.url("/sized/4000"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("download %d: %v %v", i+1, resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	key := protocol.EgressLedgerKey("agent-1", "example.com:"+fmt.Sprint(g.port()))
	// A request settles when its handler ends, just after the agent read
	// the last byte: until then it holds what it reserved.
	if e := waitSpent(led, key, ledgerBudget(rule.Budget), 8000); e.Spent != 8000 || e.Window != protocol.WindowDay {
		t.Fatalf("the ledger holds %+v, want 8000 bytes spent in a daily window", e)
	}
	// 3000 more: cut where the budget runs out.
	resp, err := c.Get(g.url("/bytes/3000"))
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil || len(b) > 2000 {
			t.Fatalf("past the budget: read %d bytes (%v), want at most the 2000 left", len(b), rerr)
		}
	}
	// A restarted gateway: the same ledger and rule (the first rig's
	// upstream), the budget spent.
	again := rule
	again.Port = g.port()
	g2 := newRigLedger(t, led, again)
	resp, err = g2.client().Get(g.url("/ok"))
	if err != nil {
		t.Fatal(err)
	}
	if f := readRefusal(t, resp); resp.StatusCode != 429 || f.Type != "egress_budget" || !strings.Contains(f.Message, "of the 10000 bytes") {
		t.Fatalf("with the budget spent: %d %+v", resp.StatusCode, f)
	}
	if e := waitSpent(led, key, ledgerBudget(rule.Budget), 10_000); e.Spent != 10_000 {
		t.Errorf("the ledger holds %d bytes spent, want exactly the budget", e.Spent)
	}
	// agent-2 has a budget of its own.
	req, _ := http.NewRequest("GET", g.url("/sized/10"), nil)
	resp, err = agentClient(g, "agent-2").Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("agent-2 refused for agent-1's budget: %v %v", resp, err)
	}
	resp.Body.Close()
}

// agentClient is g.client() as another agent (the rig reads the agent
// from the CONNECT's X-Test-Agent).
func agentClient(g *rig, agent string) *http.Client {
	c := g.client()
	c.Transport.(*http.Transport).ProxyConnectHeader = http.Header{"X-Test-Agent": {agent}}
	return c
}

// waitSpent waits up to 5 s for key's entry to show want spent and returns
// it as it last was.
func waitSpent(led *ledger.Memory, key string, b ledger.Budget, want int64) protocol.LedgerEntry {
	deadline := time.Now().Add(5 * time.Second)
	for {
		e := led.Known(key, b)
		if e.Spent == want && led.Pending(key) == 0 || time.Now().After(deadline) {
			return e
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
