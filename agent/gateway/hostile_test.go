package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/fakemodel"
)

// newModelGateway is newTestGateway in front of a fakemodel (as "anthropic"
// and "openai"), whose hostile modes a test picks by model name.
func newModelGateway(t *testing.T, opts fakemodel.Options, edit func(*Config)) (*testGateway, *fakemodel.Server) {
	t.Helper()
	fm := fakemodel.New(opts)
	srv := httptest.NewServer(fm)
	t.Cleanup(srv.Close)
	tg := newTestGateway(t, func(c *Config) {
		c.Upstreams = map[string]Upstream{
			"anthropic": {URL: srv.URL, KeyHeader: "x-api-key", Key: anthropicKey},
			"openai":    {URL: srv.URL + "/v1", KeyHeader: "Authorization", KeyPrefix: "Bearer ", Key: openaiKey},
		}
		if edit != nil {
			edit(c)
		}
	})
	return tg, fm
}

// Each hostile upstream gets a sane answer or its own passed through, the
// next call still works, and the ledger moves by what was reported, clamped.
func TestHostileUpstreams(t *testing.T) {
	tg, _ := newModelGateway(t, fakemodel.Options{Slow: 200 * time.Millisecond},
		func(c *Config) { c.ResponseHeaderTimeout = 300 * time.Millisecond })
	const huge = 3 * maxTokens // input (MaxInt64-1) + cache write (MaxInt64) clamped, cache read (-5) as 0, output clamped
	for _, tc := range []struct {
		name, path, body string
		check            func(t *testing.T, status int, h http.Header, body string, readErr error)
		charged          int64
		log              string // in the access log line
	}{
		{name: "malformed", path: "/anthropic/v1/messages", body: `{"model":"fake-malformed"}`, charged: boundOf(`{"model":"fake-malformed"}`), log: `"unmetered":"malformed JSON body`,
			check: func(t *testing.T, st int, _ http.Header, body string, _ error) {
				if st != 200 || json.Valid([]byte(body)) || !strings.Contains(body, "not JSON") {
					t.Errorf("the upstream's body did not pass through: %d %q", st, body)
				}
			}},
		{name: "huge usage json", path: "/anthropic/v1/messages", body: `{"model":"fake-huge-usage"}`, charged: huge,
			log: `"clamped":"input_tokens=9223372036854775806 output_tokens=9223372036854775807 cache_read_input_tokens=-5 cache_creation_input_tokens=9223372036854775807"`,
			check: func(t *testing.T, st int, _ http.Header, body string, _ error) {
				if st != 200 || !strings.Contains(body, `"output_tokens":9223372036854775807`) {
					t.Errorf("%d %s", st, body)
				}
			}},
		{name: "huge usage stream", path: "/anthropic/v1/messages", body: `{"model":"fake-huge-usage","stream":true}`, charged: huge, log: `"clamped":"`,
			check: func(t *testing.T, st int, _ http.Header, body string, _ error) {
				if st != 200 || !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
					t.Errorf("%d %s", st, body)
				}
			}},
		{name: "huge usage openai", path: "/openai/chat/completions", body: `{"model":"fake-huge-usage"}`, charged: 2 * maxTokens, log: `"clamped":"`,
			check: func(t *testing.T, st int, _ http.Header, _ string, _ error) {
				if st != 200 {
					t.Errorf("status %d", st)
				}
			}},
		{name: "garbage stream", path: "/anthropic/v1/messages", body: `{"model":"fake-garbage-stream","stream":true}`,
			charged: boundOf(`{"model":"fake-garbage-stream","stream":true}`), log: `"unmetered":"malformed event`, // its bound, not the 4 seen
			check: func(t *testing.T, st int, _ http.Header, body string, readErr error) {
				if st != 200 || readErr == nil || len(body) < 1<<20 {
					t.Errorf("want the stream passed on, then cut: %d, %d bytes, %v", st, len(body), readErr)
				}
			}},
		{name: "slow", path: "/anthropic/v1/messages", body: `{"model":"fake-slow"}`, charged: 19,
			check: func(t *testing.T, st int, _ http.Header, body string, _ error) {
				if st != 200 || !strings.Contains(body, fakemodel.DefaultAnswer) {
					t.Errorf("%d %s", st, body)
				}
			}},
		{name: "hang headers", path: "/anthropic/v1/messages", body: `{"model":"fake-hang-headers"}`, log: `"status":504`,
			check: func(t *testing.T, st int, h http.Header, body string, _ error) {
				if st != http.StatusGatewayTimeout || errorBody(t, body)["type"] != "upstream_timeout" || h.Get("X-Should-Retry") != "true" {
					t.Errorf("%d %v %s", st, h, body)
				}
			}},
		{name: "error", path: "/anthropic/v1/messages", body: `{"model":"fake-error"}`, log: `"status":529`,
			check: func(t *testing.T, st int, h http.Header, body string, _ error) {
				if st != 529 || errorBody(t, body)["type"] != "overloaded_error" || h.Get("X-Should-Retry") != "true" {
					t.Errorf("the upstream's error did not pass through: %d %v %s", st, h, body)
				}
			}},
		{name: "huge headers", path: "/anthropic/v1/messages", body: `{"model":"fake-huge-headers"}`, log: `"status":502`,
			check: func(t *testing.T, st int, _ http.Header, body string, _ error) {
				if st != http.StatusBadGateway || errorBody(t, body)["type"] != "upstream_unreachable" {
					t.Errorf("%d %s", st, body)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, lines := tg.gw.Spent("agent-1"), strings.Count(tg.logs.String(), `"msg":"model call"`)
			begin := time.Now()
			st, h, body, readErr := rawPost(tg.url+tc.path, tc.body)
			tc.check(t, st, h, body, readErr)
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			waitFor(t, func() bool { return strings.Count(tg.logs.String(), `"msg":"model call"`) > lines }, "the access log line")
			if got := tg.gw.Spent("agent-1") - before; got != tc.charged {
				t.Errorf("charged %d, want %d", got, tc.charged)
			}
			last := tg.logs.String()[strings.LastIndex(tg.logs.String(), `"msg":"model call"`):]
			if !strings.Contains(last, tc.log) {
				t.Errorf("the access log line lacks %s:\n%s", tc.log, last)
			}
			// And the gateway still serves the next call.
			before = tg.gw.Spent("agent-1")
			if st, _, body := tg.post(t, "/anthropic/v1/messages", `{"model":"claude-x"}`); st != 200 || !strings.Contains(body, fakemodel.DefaultAnswer) {
				t.Fatalf("the next call: %d %s", st, body)
			}
			waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 }, "the next call settled and logged")
			if got := tg.gw.Spent("agent-1") - before; got != 19 {
				t.Errorf("the next call charged %d, want 19", got)
			}
		})
	}
	for _, u := range tg.reported() {
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.Total < 0 || u.Total > 3*maxTokens || u.SpentTokens <= 0 {
			t.Errorf("a report out of range: %+v", u)
		}
	}
}

// rawPost is post without the test's helpers: the body read so far and the
// read's error come back too.
func rawPost(url, body string) (int, http.Header, string, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", dummyKey)
	return do(req)
}

// do sends req and returns the status, the header, the body read so far and
// the read's error.
func do(req *http.Request) (int, http.Header, string, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// A huge report exhausts the agent's budget, and only that.
func TestHugeUsageSpendsTheBudgetWithoutOverflow(t *testing.T) {
	tg, fm := newModelGateway(t, fakemodel.Options{}, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 1000} })
	if st, _, _ := tg.post(t, "/anthropic/v1/messages", `{"model":"fake-huge-usage"}`); st != 200 {
		t.Fatalf("status %d", st)
	}
	waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 }, "the charge")
	if s := tg.gw.Spent("agent-1"); s != 3*maxTokens {
		t.Errorf("spent %d, want %d", s, int64(3*maxTokens))
	}
	u := tg.reported()
	if len(u) != 1 || u[0].SpentTokens != 3*maxTokens || u[0].BudgetTokens != 1000 {
		t.Errorf("reported %+v", u)
	}
	st, _, body := tg.post(t, "/anthropic/v1/messages", `{"model":"claude-x"}`)
	if st != http.StatusTooManyRequests || errorBody(t, body)["spent"] != float64(3*maxTokens) {
		t.Errorf("over budget: %d %s", st, body)
	}
	if n := len(fm.Seen()); n != 1 {
		t.Errorf("the upstream saw %d calls, want 1", n)
	}
}

func TestMeterClampsOutOfRangeCounts(t *testing.T) {
	u, ok, problem := meterAll(t, "application/json",
		`{"usage":{"input_tokens":1e30,"output_tokens":-7,"cache_read_input_tokens":99999999999999999999999,"cache_creation_input_tokens":2.5}}`)
	if !ok || problem != "" || u.InputTokens != 2*maxTokens+2 || u.OutputTokens != 0 || u.Total != 2*maxTokens+2 {
		t.Errorf("%+v ok=%v problem=%q", u, ok, problem)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	m := newMeter(h, io.NopCloser(strings.NewReader(`{"usage":{"prompt_tokens":-1,"completion_tokens":3}}`)))
	io.ReadAll(m)
	if u, ok, _ := m.result(); !ok || u.Total != 3 || m.clamped() != "prompt_tokens=-1" {
		t.Errorf("%+v ok=%v clamped=%q", u, ok, m.clamped())
	}
	// A count that is not a number is still no count.
	for _, body := range []string{`{"usage":{"input_tokens":"5"}}`, `{"usage":{"input_tokens":true}}`} {
		if _, ok, problem := meterAll(t, "application/json", body); ok || !strings.HasPrefix(problem, "malformed JSON body") {
			t.Errorf("%s: ok=%v problem=%q", body, ok, problem)
		}
	}
}

// tokenCaller knows agents by the token sent as the API key, as the binary's
// token mode does.
func tokenCaller(r *http.Request) (string, bool) {
	tok := r.Header.Get("X-Api-Key")
	if tok == "" {
		tok, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	switch tok {
	case "tok-agent-1":
		return "agent-1", true
	case "tok-agent-2":
		return "agent-2", true
	}
	return "", false
}

func TestCallerByToken(t *testing.T) {
	tg, fm := newModelGateway(t, fakemodel.Options{RequireKey: anthropicKey}, func(c *Config) {
		c.CallerOf, c.CallerOfRequest = nil, tokenCaller
	})
	for _, tc := range []struct {
		header, value string
		want          int
	}{
		{"X-Api-Key", "tok-agent-2", 200},
		{"Authorization", "Bearer tok-agent-2", 200},
		{"X-Api-Key", "tok-wrong", 401},
		{"", "", 401},
	} {
		req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{"model":"m"}`))
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %q: status %d, want %d: %s", tc.header, tc.value, resp.StatusCode, tc.want, b)
		}
		if tc.want == 401 && errorBody(t, string(b))["type"] != "unknown_caller" {
			t.Errorf("%s %q: %s", tc.header, tc.value, b)
		}
	}
	seen := fm.Seen()
	if len(seen) != 2 {
		t.Fatalf("the upstream saw %d calls, want the 2 with a known token", len(seen))
	}
	for _, s := range seen {
		if s.APIKey != anthropicKey || s.Authorization != "" {
			t.Errorf("the upstream got x-api-key %q, authorization %q: want the real key only", s.APIKey, s.Authorization)
		}
	}
	waitFor(t, func() bool { return tg.gw.Spent("agent-2") == 38 }, "agent-2 charged for its two calls")
	if tg.gw.Spent("agent-1") != 0 {
		t.Errorf("agent-1 was charged")
	}
	if strings.Contains(tg.logs.String(), "tok-") {
		t.Errorf("a token is in the log:\n%s", tg.logs.String())
	}
	// A CONNECT without a token is asked for one, as proxies ask.
	resp, _, _ := connectTo(t, tg.url, "example.com:443")
	if resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") == "" {
		t.Errorf("CONNECT without a token: %s %v", resp.Status, resp.Header)
	}
}

func TestConfigNeedsExactlyOneCallerFunction(t *testing.T) {
	up := map[string]Upstream{"anthropic": {URL: "https://x", KeyHeader: "x-api-key", Key: "k"}}
	byAddr := func(netip.Addr) (string, bool) { return "", false }
	both := Config{Upstreams: up, CallerOf: byAddr, CallerOfRequest: tokenCaller}
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "callerOf: set only one of CallerOf and CallerOfRequest") {
		t.Errorf("both: %v", err)
	}
	if err := (&Config{Upstreams: up, CallerOfRequest: tokenCaller}).Validate(); err != nil {
		t.Errorf("token only: %v", err)
	}
	if err := (&Config{Upstreams: up, CallerOfRequest: tokenCaller, MaxInFlight: -1, ResponseHeaderTimeout: -time.Second}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "maxInFlight: must be >= 0") || !strings.Contains(err.Error(), "responseHeaderTimeout: must be >= 0") {
		t.Errorf("negative limits: %v", err)
	}
}

// One agent at its cap is refused more, with a retryable 429; another agent
// is not held up by it, and the first gets its slots back as calls end.
func TestInFlightCapPerAgent(t *testing.T) {
	tg, fm := newModelGateway(t, fakemodel.Options{}, func(c *Config) {
		c.CallerOf, c.CallerOfRequest = nil, tokenCaller
		c.MaxInFlight = 2
	})
	call := func(ctx context.Context, token, model string) (int, http.Header, string, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{"model":"`+model+`"}`))
		req.Header.Set("X-Api-Key", token)
		return do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); call(ctx, "tok-agent-1", fakemodel.ModelHangHeaders) }()
	}
	waitFor(t, func() bool { return len(fm.Seen()) == 2 }, "two calls of agent-1 held by the upstream")

	st, h, body, err := call(context.Background(), "tok-agent-1", "claude-x")
	if err != nil || st != http.StatusTooManyRequests {
		t.Fatalf("agent-1's third call: %d %v %s", st, err, body)
	}
	want := `{"type":"error","error":{"type":"rate_limit_error","message":"agent agent-1 has 2 requests in flight (the gateway's limit per agent)"}}`
	if strings.TrimSpace(body) != want {
		t.Errorf("body %s\nwant %s", body, want)
	}
	if h.Get("X-Should-Retry") != "true" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	if n := len(fm.Seen()); n != 2 {
		t.Errorf("the refused call reached the upstream")
	}
	if st, _, body, err := call(context.Background(), "tok-agent-2", "claude-x"); st != 200 || !strings.Contains(body, fakemodel.DefaultAnswer) {
		t.Errorf("agent-2 while agent-1 is at its cap: %d %v %s", st, err, body)
	}
	cancel()
	wg.Wait()
	waitFor(t, func() bool {
		st, _, _, _ := call(context.Background(), "tok-agent-1", "claude-x")
		return st == 200
	}, "agent-1's slots back")
	if !strings.Contains(tg.logs.String(), `"status":499`) {
		t.Errorf("the calls the agent gave up are not logged as 499:\n%s", tg.logs.String())
	}
}
