package gateway

import (
	"bufio"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/testkit"
)

func TestKeyInjectedAndAgentCredentialsNeverForwarded(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) {
		// A key header the gateway does not strip by name is replaced, not added to.
		c.Upstreams["google"] = Upstream{API: APIAnthropic, URL: c.Upstreams["anthropic"].URL, KeyHeader: "x-goog-api-key", Key: "g-REAL-KEY"}
	})
	for _, tc := range []struct {
		path, wantPath, header, want string
	}{
		{"/google/v1/messages?beta=true", "/v1/messages", "X-Goog-Api-Key", "g-REAL-KEY"},
		{"/anthropic/v1/messages?beta=true", "/v1/messages", "X-Api-Key", anthropicKey},
		{"/openai/chat/completions?beta=true", "/v1/chat/completions", "Authorization", "Bearer " + openaiKey},
	} {
		req, _ := http.NewRequest("POST", tg.url+tc.path, strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Content-Type", "application/json")
		for _, h := range []string{"X-Api-Key", "Api-Key", "Proxy-Authorization", "X-Goog-Api-Key"} {
			req.Header.Set(h, dummyKey)
		}
		req.Header.Set("Authorization", "Bearer "+dummyKey)
		req.Header.Set("Cookie", "c="+dummyKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", tc.path, resp.StatusCode)
		}
		if sc := resp.Header.Values("Set-Cookie"); len(sc) > 0 {
			t.Errorf("%s: the upstream's Set-Cookie reached the agent: %q", tc.path, sc)
		}
		seen := tg.up.requests()
		got := seen[len(seen)-1]
		if got.Path != tc.wantPath || got.Query != "beta=true" {
			t.Errorf("%s: upstream got %s?%s, want %s?beta=true", tc.path, got.Path, got.Query, tc.wantPath)
		}
		if v := got.Header.Values(tc.header); len(v) != 1 || v[0] != tc.want {
			t.Errorf("%s: upstream's %s = %q, want the gateway's key", tc.path, tc.header, v)
		}
		for name, vals := range got.Header {
			for _, v := range vals {
				if strings.Contains(v, dummyKey) {
					t.Errorf("%s: the agent's dummy key reached the upstream in %s", tc.path, name)
				}
			}
		}
		for _, h := range []string{"Api-Key", "Cookie", "Proxy-Authorization"} {
			if v := got.Header.Get(h); v != "" {
				t.Errorf("%s: %s reached the upstream", tc.path, h)
			}
		}
	}
	// Each upstream gets its own key only.
	if v := tg.up.requests()[2].Header.Get("X-Api-Key"); v != "" {
		t.Errorf("the openai call carried an X-Api-Key")
	}
}

// A streamed event must reach the agent while the upstream is still
// streaming: the upstream holds the rest until the test has read the first.
func TestStreamReachesAgentBeforeItEnds(t *testing.T) {
	tg := newTestGateway(t, nil)
	tg.up.hold, tg.up.firstSent = make(chan struct{}), make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(tg.up.hold)
		}
	}
	defer release()

	req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	first := make(chan string, 1)
	br := bufio.NewReader(resp.Body)
	go func() {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			ev.WriteString(line)
			if err != nil || line == "\n" {
				first <- ev.String()
				return
			}
		}
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, "event: message_start") {
			t.Fatalf("first event: %q", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not reach the agent while the upstream held the rest: the gateway buffers streams")
	}
	release()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("stream did not end with message_stop: %q", rest)
	}
	resp.Body.Close()
	waitFor(t, func() bool { return tg.gw.Spent("agent-1") == 11+5+7+23 }, "the stream charged")
}

// An agent that hangs up mid-stream is charged what the upstream reported
// until then (message_start: the whole input and one output token).
// A stream the agent hangs up on is charged its bound, not the 24 tokens
// seen before the end: the upstream may bill the whole generation.
func TestCutStreamIsChargedItsBound(t *testing.T) {
	tg := newTestGateway(t, nil)
	tg.up.hold, tg.up.firstSent = make(chan struct{}), make(chan struct{})
	defer close(tg.up.hold)
	req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-tg.up.firstSent
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // hang up
	waitFor(t, func() bool { return strings.Contains(tg.logs.String(), `"msg":"model call"`) }, "the access log")
	if s, want := tg.gw.Spent("agent-1"), boundOf(`{"stream":true}`); s != want {
		t.Errorf("spent %d, want the bound %d (24 tokens seen)", s, want)
	}
	if !strings.Contains(tg.logs.String(), `"unmetered":"response cut short"`) {
		t.Errorf("the log does not say the response was cut short:\n%s", tg.logs.String())
	}
}

func TestBudgetRefusesWithoutCallingUpstream(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 30} })
	// Under budget: the call goes through and is charged after it (46 > 30:
	// a call in flight may overshoot). It names its cap: one of the
	// gateway's own would be fitted to the 30 tokens, below the floor.
	if st, _, _ := tg.post(t, "/anthropic/v1/messages", `{"max_tokens":64}`); st != 200 {
		t.Fatalf("first call: status %d", st)
	}
	waitFor(t, func() bool { return tg.gw.Spent("agent-1") == 46 }, "the first call charged 46")
	st, h, body := tg.post(t, "/anthropic/v1/messages", `{}`)
	if st != http.StatusTooManyRequests {
		t.Fatalf("over budget: status %d, want 429 (%s)", st, body)
	}
	if h.Get("X-Should-Retry") != "false" {
		t.Errorf("429 without x-should-retry: false: SDKs would retry it")
	}
	e := errorBody(t, body)
	want := map[string]any{"type": "budget_exceeded", "budget": "tokens", "limit": 30.0, "spent": 46.0, "agent": "agent-1"}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("error.%s = %v, want %v (%s)", k, e[k], v, body)
		}
	}
	if n := len(tg.up.requests()); n != 1 {
		t.Errorf("the upstream was called %d times, want 1: the refused call reached it", n)
	}
	// Another upstream is refused the same: the budget is the agent's.
	if st, _, _ := tg.post(t, "/openai/chat/completions", `{}`); st != http.StatusTooManyRequests {
		t.Errorf("openai over budget: status %d", st)
	}
}

// A budget of 0 is no cap, as in the flock's config; a budget of 1 refuses
// the second call (the first is admitted below its limit).
func TestBudgetZeroIsNoCapAndOthersUnlimited(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 0} })
	for i := range 3 {
		if st, _, _ := tg.post(t, "/anthropic/v1/messages", `{}`); st != 200 {
			t.Fatalf("budget 0, call %d: status %d, want 200", i, st)
		}
	}
	tg1 := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 1} })
	tg1.post(t, "/anthropic/v1/messages", `{}`)
	waitFor(t, func() bool { return tg1.gw.inFlightOf("agent-1") == 0 }, "the first call settled")
	if st, _, _ := tg1.post(t, "/anthropic/v1/messages", `{}`); st != http.StatusTooManyRequests {
		t.Fatalf("budget 1, second call: status %d, want 429", st)
	}
	tg2 := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-2": 1} })
	for i := 0; i < 3; i++ {
		if st, _, _ := tg2.post(t, "/anthropic/v1/messages", `{}`); st != 200 {
			t.Fatalf("agent without a budget, call %d: status %d", i, st)
		}
	}
}

func TestUnknownCallerIsRefused(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) {
		c.CallerOf = func(netip.Addr) (string, bool) { return "", false }
	})
	st, _, body := tg.post(t, "/anthropic/v1/messages", `{}`)
	if st != http.StatusForbidden || errorBody(t, body)["type"] != "unknown_caller" {
		t.Fatalf("unknown caller: %d %s", st, body)
	}
	if n := len(tg.up.requests()); n != 0 {
		t.Errorf("the upstream was called for an unknown caller")
	}
}

func TestCallerIsTheAddressNotTheRequest(t *testing.T) {
	var mu sync.Mutex
	var asked []netip.Addr
	tg := newTestGateway(t, func(c *Config) {
		c.CallerOf = func(a netip.Addr) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, a)
			return "agent-7", true
		}
	})
	req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Forwarded-For", "10.9.9.9")
	req.Header.Set("X-Agent-Id", "agent-2")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool { return tg.gw.Spent("agent-7") > 0 }, "a charge")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("CallerOf asked %v, want the source address 127.0.0.1", asked)
	}
	if tg.gw.Spent("agent-7") != 46 || tg.gw.Spent("agent-2") != 0 {
		t.Errorf("charged agent-7 %d, agent-2 %d: want the address's agent charged", tg.gw.Spent("agent-7"), tg.gw.Spent("agent-2"))
	}
	if got := tg.up.requests()[0].Header.Get("X-Forwarded-For"); got != "" {
		t.Errorf("X-Forwarded-For reached the upstream: %q", got)
	}
}

func TestUnknownUpstreamAndBadPaths(t *testing.T) {
	tg := newTestGateway(t, nil)
	st, h, body := tg.post(t, "/gemini/v1/models", `{}`)
	if st != http.StatusNotFound || h.Get("Content-Type") != "application/json" {
		t.Fatalf("unknown upstream: %d %q", st, h.Get("Content-Type"))
	}
	e := errorBody(t, body)
	if e["type"] != "unknown_upstream" || !strings.Contains(e["message"].(string), `"gemini"`) {
		t.Errorf("unknown upstream body: %s", body)
	}
	if st, _, _ := tg.post(t, "/openai/%2e%2e/admin", `{}`); st != http.StatusBadRequest {
		t.Errorf("a path with .. : status %d, want 400", st)
	}
	if n := len(tg.up.requests()); n != 0 {
		t.Errorf("the upstream was called %d times", n)
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	tg := newTestGateway(t, nil)
	tg.up.srv.Close()
	st, _, body := tg.post(t, "/anthropic/v1/messages", `{}`)
	if st != http.StatusBadGateway || errorBody(t, body)["type"] != "upstream_unreachable" {
		t.Fatalf("upstream down: %d %s", st, body)
	}
}

// The log says who called what and what it cost, and never holds a key, a
// body, a query string or a header's value.
func TestLogHoldsNoKeyOrBody(t *testing.T) {
	tg := newTestGateway(t, nil)
	tg.post(t, "/anthropic/v1/messages?q=QUERY-MARKER", `{"messages":[{"role":"user","content":"REQUEST-MARKER"}]}`)
	tg.post(t, "/anthropic/v1/messages", `{"stream":true,"content":"REQUEST-MARKER"}`)
	tg.post(t, "/openai/chat/completions", `{"stream":true,"content":"REQUEST-MARKER"}`)
	tg.post(t, "/openai/responses", `{"stream":true}`)
	tg.post(t, "/anthropic/v1/malformed", `{"content":"REQUEST-MARKER"}`)
	tg.post(t, "/nowhere/x", `REQUEST-MARKER`)

	waitFor(t, func() bool { return strings.Count(tg.logs.String(), `"msg":"model call"`) == 6 }, "six access log lines")
	logs := tg.logs.String()
	for _, secret := range []string{anthropicKey, openaiKey, dummyKey, "REAL-KEY", "REQUEST-MARKER", "RESPONSE-MARKER", "QUERY-MARKER", "upstream-cookie"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	// And it does log the calls, with their tokens.
	var calls int
	for _, l := range tg.logs.lines(t) {
		if l["msg"] != "model call" {
			continue
		}
		calls++
		if l["agent"] != "agent-1" || l["method"] != "POST" || l["path"] == nil || l["status"] == nil || l["duration_ms"] == nil {
			t.Errorf("access log line lacks a field: %v", l)
		}
		if l["path"] == "/anthropic/v1/messages" && l["total_tokens"] != 46.0 {
			t.Errorf("access log of a metered call: %v", l)
		}
	}
	if calls != 6 {
		t.Errorf("%d access log lines, want 6:\n%s", calls, logs)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := func(netip.Addr) (string, bool) { return "", false }
	good := Upstream{URL: "https://api.anthropic.com", KeyHeader: "x-api-key", Key: "sk-SECRET\nVALUE"}
	cfg := Config{
		Upstreams: map[string]Upstream{
			"Anthropic": good,
			"plain":     {URL: "ftp://x", KeyHeader: "x-api-key", Key: "k"},
			"rel":       {URL: "/v1", KeyHeader: "bad header", Key: ""},
			"creds":     {URL: "https://user:pw@x", KeyHeader: "x-api-key", Key: "k"},
		},
		Budgets: map[string]int64{"agent-1": -1, "Agent 2": 5},
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`upstreams["Anthropic"]: name must match ^[a-z][a-z0-9-]{0,30}$`,
		`upstreams["Anthropic"].key: must not contain CR or LF`,
		`upstreams["plain"].url: must be an absolute http or https URL (got "ftp://x")`,
		`upstreams["rel"].url: must be an absolute http or https URL`,
		`upstreams["rel"].keyHeader: must be a header name`,
		`upstreams["rel"].key: must not be empty`,
		`upstreams["creds"].url: must not carry credentials`,
		`callerOf: required`,
		`budgets["agent-1"]: must be >= 0 tokens (0: no cap) (got -1)`,
		`budgets["Agent 2"]: must be an agent ID`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SECRET") || strings.Contains(msg, "pw@") {
		t.Errorf("an error shows a secret:\n%s", msg)
	}
	good.Key = "k"
	if err := (&Config{Upstreams: map[string]Upstream{"anthropic": good}, CallerOf: ok}).Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
	if _, err := New(cfg); err == nil {
		t.Error("New took a bad config")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, what, cond)
}

// boundOf is what a metered call with this body reserves and, when its usage
// cannot be read whole, costs: the default output cap and the input estimate.
func boundOf(body string) int64 { return DefaultMaxOutputTokens + estimateInput([]byte(body)) }
