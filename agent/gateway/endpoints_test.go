package gateway

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/fakemodel"
)

// Each kind forwards its metered endpoints and its free ones, and refuses
// everything else with a 403 naming the endpoint, before the upstream sees
// it: batches, files, model listings, images, legacy completions and unknown
// paths answer no usage, so forwarding them would be calls for free.
func TestEndpointsAllowList(t *testing.T) {
	tg := newTestGateway(t, nil)
	for _, tc := range []struct {
		method, path string
		allowed      bool
	}{
		{"POST", "/anthropic/v1/messages", true},
		{"POST", "/anthropic/v1/messages/count_tokens", true},
		{"POST", "/anthropic/v1/messages/batches", false},
		{"GET", "/anthropic/v1/messages/batches/msgbatch_1/results", false},
		{"POST", "/anthropic/v1/files", false},
		{"GET", "/anthropic/v1/models", false},
		{"POST", "/anthropic/v1/complete", false},
		{"GET", "/anthropic/v1/messages", false},
		{"POST", "/openai/chat/completions", true},
		{"POST", "/openai/responses", true},
		{"POST", "/openai/embeddings", true},
		{"POST", "/openai/completions", false},
		{"POST", "/openai/batches", false},
		{"POST", "/openai/files", false},
		{"POST", "/openai/images/generations", false},
		{"POST", "/openai/fine_tuning/jobs", false},
		{"GET", "/openai/models", false},
		{"POST", "/openai/audio/speech", false},
	} {
		before := len(tg.up.requests())
		req, _ := http.NewRequest(tc.method, tg.url+tc.path, strings.NewReader(`{"model":"m","input":"x"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error apiError }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		forwarded := len(tg.up.requests()) > before
		switch {
		case tc.allowed && (resp.StatusCode == http.StatusForbidden || !forwarded):
			t.Errorf("%s %s: %d, forwarded %v: want it forwarded", tc.method, tc.path, resp.StatusCode, forwarded)
		case !tc.allowed && (resp.StatusCode != http.StatusForbidden || forwarded || body.Error.Type != "endpoint_not_allowed" ||
			!strings.Contains(body.Error.Message, tc.method+" "+tc.path)):
			t.Errorf("%s %s: %d %+v, forwarded %v: want 403 endpoint_not_allowed naming it, not forwarded", tc.method, tc.path, resp.StatusCode, body.Error, forwarded)
		}
	}
	if s := tg.gw.Spent("agent-1"); s == 0 {
		t.Error("the metered calls were not charged")
	}
}

// An upstream whose kind is not known is refused at configuration time.
func TestUpstreamKindRequired(t *testing.T) {
	cfg := Config{
		Upstreams: map[string]Upstream{"local": {URL: "http://127.0.0.1:1", KeyHeader: "x-api-key", Key: "k"}},
		CallerOf:  func(netip.Addr) (string, bool) { return "", false },
	}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), `upstreams["local"].api: must be "anthropic" or "openai"`) {
		t.Errorf("an upstream without a kind: %v", err)
	}
	cfg.Upstreams["local"] = Upstream{API: APIOpenAI, URL: "http://127.0.0.1:1", KeyHeader: "x-api-key", Key: "k"}
	if _, err := New(cfg); err != nil {
		t.Errorf("with its kind: %v", err)
	}
}

// What the gateway writes into a metered request: the default output cap
// where none is named (an agent's own cap is kept), and a Chat Completions
// stream's request for usage; and what it refuses: tools billed per use.
func TestRequestsMadeMeterable(t *testing.T) {
	tg := newTestGateway(t, nil)
	last := func() map[string]any {
		rs := tg.up.requests()
		var m map[string]any
		if err := json.Unmarshal([]byte(rs[len(rs)-1].Body), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tg.post(t, "/openai/chat/completions", `{"model":"m","messages":[]}`)
	if got := last()["max_completion_tokens"]; got != float64(DefaultMaxOutputTokens) {
		t.Errorf("chat without a cap: the upstream saw max_completion_tokens %v, want %d", got, DefaultMaxOutputTokens)
	}
	tg.post(t, "/openai/chat/completions", `{"model":"m","max_tokens":77,"stream":true}`)
	m := last()
	if m["max_tokens"] != float64(77) || m["max_completion_tokens"] != nil {
		t.Errorf("chat with its own cap: the upstream saw %v", m)
	}
	if so, _ := m["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("a chat stream without include_usage: the upstream saw stream_options %v", m["stream_options"])
	}
	tg.post(t, "/openai/responses", `{"model":"m","input":"hi"}`)
	if got := last()["max_output_tokens"]; got != float64(DefaultMaxOutputTokens) {
		t.Errorf("responses without a cap: the upstream saw max_output_tokens %v", got)
	}
	tg.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":50}`)
	if got := last()["max_tokens"]; got != float64(50) {
		t.Errorf("messages with its cap: the upstream saw max_tokens %v", got)
	}
	for _, body := range []string{
		`{"model":"m","max_tokens":50,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
		`{"model":"m","max_tokens":50,"tools":[{"type":"code_execution_20250522","name":"code_execution"}]}`,
	} {
		before := len(tg.up.requests())
		if st, _, b := tg.post(t, "/anthropic/v1/messages", body); st != http.StatusForbidden || !strings.Contains(b, "tool_not_allowed") || len(tg.up.requests()) != before {
			t.Errorf("%s: %d %s", body, st, b)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{"/openai/responses", `{"model":"m","tools":[{"type":"web_search_preview"}]}`},
		{"/openai/chat/completions", `{"model":"m","web_search_options":{}}`},
	} {
		if st, _, b := tg.post(t, tc.path, tc.body); st != http.StatusForbidden || !strings.Contains(b, "tool_not_allowed") {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, st, b)
		}
	}
	// Tools with which the upstream connects to a server the request names:
	// refused, whatever the operator priced.
	for _, tc := range []struct{ path, body string }{
		{"/anthropic/v1/messages", `{"model":"m","max_tokens":50,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`},
		{"/anthropic/v1/messages", `{"model":"m","max_tokens":50,"mcp_servers":[{"type":"url","url":"https://example.com/sse","name":"x"}]}`},
		{"/openai/responses", `{"model":"m","tools":[{"type":"mcp","server_label":"x","server_url":"https://example.com/mcp"}]}`},
	} {
		before := len(tg.up.requests())
		if st, _, b := tg.post(t, tc.path, tc.body); st != http.StatusForbidden || !strings.Contains(b, "a way out of the flock") || len(tg.up.requests()) != before {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, st, b)
		}
	}
	// Input the upstream stores, which the gateway cannot bound.
	for _, body := range []string{
		`{"model":"m","previous_response_id":"resp_1","input":"more"}`,
		`{"model":"m","conversation":"conv_1","input":"more"}`,
		`{"model":"m","prompt":{"id":"pmpt_1"}}`,
	} {
		if st, _, b := tg.post(t, "/openai/responses", body); st != http.StatusBadRequest || !strings.Contains(b, "cannot bound") {
			t.Errorf("%s: %d %s", body, st, b)
		}
	}
	for _, body := range []string{`{"model":"m","n":0}`, `{"model":"m","n":129}`, `{"model":"m","n":"2"}`} {
		if st, _, b := tg.post(t, "/openai/chat/completions", body); st != http.StatusBadRequest || !strings.Contains(b, "n must be") {
			t.Errorf("%s: %d %s", body, st, b)
		}
	}
	// A client-side tool (the agent runs it) is the agent's business.
	if st, _, b := tg.post(t, "/anthropic/v1/messages", `{"model":"m","max_tokens":50,"tools":[{"name":"get_weather","input_schema":{}}]}`); st != 200 {
		t.Errorf("a client tool: %d %s", st, b)
	}
}

// The input estimate counts text by its length and inline images by what
// they cost, not by their base64 bytes; documents by their decoded size.
func TestEstimateInput(t *testing.T) {
	text := strings.Repeat("word ", 3000) // 15,000 bytes: about 3,750 tokens billed
	if n := estimateInput([]byte(`{"messages":[{"role":"user","content":"` + text + `"}]}`)); n < 3750 || n > 6000 {
		t.Errorf("15,000 bytes of text estimated at %d tokens", n)
	}
	img := strings.Repeat("A", 4<<20) // 3 MiB of image as base64
	anth := `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + img + `"}},{"type":"text","text":"what is it?"}]}]}`
	if n := estimateInput([]byte(anth)); n < imageTokens || n > imageTokens+100 {
		t.Errorf("a 3 MiB image estimated at %d tokens, want about %d", n, imageTokens)
	}
	oai := `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,` + img + `"}}]}]}`
	if n := estimateInput([]byte(oai)); n < imageTokens || n > imageTokens+100 {
		t.Errorf("a 3 MiB data URL image estimated at %d tokens", n)
	}
	pdf := strings.Repeat("A", 400<<10) // 300 KiB of PDF
	doc := `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}]}]}`
	if n, want := estimateInput([]byte(doc)), int64(300<<10)/3; n < want || n > want+100 {
		t.Errorf("a 300 KiB PDF estimated at %d tokens, want about %d", n, want)
	}
}

// 40 streaming calls at once against a budget almost spent: the first is
// admitted, its bound reserved, and the others are refused until it
// settles, so the agent overshoots by at most one call's bound (before: 29
// of 40 let through, 585 tokens over a 2,000-token budget).
func TestConcurrentCallsOvershootByAtMostOneBound(t *testing.T) {
	const budget = 2000
	tg, _ := newModelGateway(t, fakemodel.Options{Slow: 300 * time.Millisecond}, func(c *Config) {
		c.Budgets = map[string]int64{"agent-1": budget}
	})
	body := `{"model":"fake-slow","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	// Spend to just under the budget with plain calls.
	for tg.gw.Spent("agent-1") < budget-60 {
		if st, _, b := tg.post(t, "/anthropic/v1/messages", `{"model":"claude-x","max_tokens":10}`); st != 200 {
			t.Fatalf("spending: %d %s", st, b)
		}
	}
	spentBefore := tg.gw.Spent("agent-1")
	var wg sync.WaitGroup
	statuses := make(chan int, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, _, _ := rawPost(tg.url+"/anthropic/v1/messages", body)
			statuses <- st
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for st := range statuses {
		counts[st]++
	}
	waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 }, "every reservation settled")
	spent := tg.gw.Spent("agent-1")
	bound := boundOf(body) - DefaultMaxOutputTokens + 200
	t.Logf("spent %d before, %d after 40 concurrent calls (%v); one call's bound %d", spentBefore, spent, counts, bound)
	if counts[200] != 1 || counts[429] != 39 {
		t.Errorf("statuses %v: want one admitted, 39 refused", counts)
	}
	if spent > budget+bound {
		t.Errorf("spent %d of a %d budget: more than one call's bound (%d) over", spent, budget, bound)
	}
}

// What the operator prices is forwarded and costs its price: an endpoint
// outside the allow-list per call, a per-use tool per call that offers it
// (on top of the tokens). Price keys are checked.
func TestOperatorPrices(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) {
		up := c.Upstreams["anthropic"]
		up.Prices = map[string]int64{"GET /v1/models": 5, "tool:web_search": 100}
		c.Upstreams["anthropic"] = up
	})
	req, _ := http.NewRequest("GET", tg.url+"/anthropic/v1/models", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 && tg.gw.Spent("agent-1") > 0 }, "the priced call settled")
	if s := tg.gw.Spent("agent-1"); s != 5 {
		t.Errorf("a priced endpoint (answered %d) cost %d, want its price 5", resp.StatusCode, s)
	}
	body := `{"model":"m","max_tokens":50,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`
	if st, _, b := tg.post(t, "/anthropic/v1/messages", body); st != 200 {
		t.Fatalf("a priced tool: %d %s", st, b)
	}
	waitFor(t, func() bool { return tg.gw.inFlightOf("agent-1") == 0 && tg.gw.Spent("agent-1") > 5 }, "the call with a tool charged")
	if s := tg.gw.Spent("agent-1"); s != 5+46+100 {
		t.Errorf("a call offering a priced tool cost %d, want its 46 tokens and the tool's 100", s-5)
	}
	bad := Config{
		Upstreams: map[string]Upstream{"anthropic": {URL: "http://127.0.0.1:1", KeyHeader: "x-api-key", Key: "k",
			Prices: map[string]int64{"models": 1, "tool:web_search": -1}}},
		CallerOf: func(netip.Addr) (string, bool) { return "", false },
	}
	_, err = New(bad)
	if err == nil || !strings.Contains(err.Error(), `upstreams["anthropic"].prices["models"]: must be "METHOD /path"`) ||
		!strings.Contains(err.Error(), `prices["tool:web_search"]: must be 0 to`) {
		t.Errorf("bad prices: %v", err)
	}
}

// Fields are read by their exact names, as the upstreams read them: a cap
// under another case is no cap (the default is written in); a cap that is
// not a positive number is refused; what is written in keeps the body JSON.
func TestOutputCapByExactName(t *testing.T) {
	tg := newTestGateway(t, nil)
	last := func() map[string]any {
		rs := tg.up.requests()
		var m map[string]any
		if err := json.Unmarshal([]byte(rs[len(rs)-1].Body), &m); err != nil {
			t.Fatalf("the upstream got %q: %v", rs[len(rs)-1].Body, err)
		}
		return m
	}
	tg.post(t, "/openai/chat/completions", `{"MAX_COMPLETION_TOKENS":1,"model":"m"}`)
	if got := last()["max_completion_tokens"]; got != float64(DefaultMaxOutputTokens) {
		t.Errorf("a cap under another case: the upstream saw max_completion_tokens %v, want the default written in", got)
	}
	tg.post(t, "/openai/chat/completions", ` {}`)
	if m := last(); m["max_completion_tokens"] != float64(DefaultMaxOutputTokens) || len(m) != 1 {
		t.Errorf("an empty object: the upstream saw %v", m)
	}
	for _, body := range []string{`{"max_tokens":-5}`, `{"max_tokens":"many"}`, `{"max_tokens":0}`} {
		if st, _, b := tg.post(t, "/anthropic/v1/messages", body); st != http.StatusBadRequest || !strings.Contains(b, "max_tokens must be a positive integer") {
			t.Errorf("%s: %d %s", body, st, b)
		}
	}
	if st, _, b := tg.post(t, "/anthropic/v1/messages", `[1,2]`); st != http.StatusBadRequest {
		t.Errorf("a body that is not an object: %d %s", st, b)
	}
}

// Request bodies held at once are bounded in all and per agent: one agent at
// its share is refused more (retryable), another still gets its own.
func TestBodyBudget(t *testing.T) {
	b := newBodyBudget(100, 60)
	r1, ok := b.acquire("agent-1", 50)
	if !ok {
		t.Fatal("a first body refused")
	}
	if _, ok := b.acquire("agent-1", 20); ok {
		t.Error("agent-1 held 70 of a share of 60")
	}
	r2, ok := b.acquire("agent-2", 40)
	if !ok {
		t.Error("agent-2 refused while agent-1 holds its share")
	}
	if _, ok := b.acquire("agent-3", 20); ok {
		t.Error("110 of 100 held in all")
	}
	r1()
	r1() // once only
	if _, ok := b.acquire("agent-3", 50); !ok {
		t.Error("a released body made no room")
	}
	r2()
	if b.used != 50 {
		t.Errorf("held %d after the releases, want 50", b.used)
	}
}

// Each of Chat Completions' n choices may take the whole output cap: the
// bound reserves n of them.
func TestChoicesMultiplyTheBound(t *testing.T) {
	e := endpoint{method: http.MethodPost, path: "/v1/chat/completions", meter: metered, capField: "max_completion_tokens", streamUsage: true}
	one, r1 := prepare(e, []byte(`{"model":"m","max_completion_tokens":1000,"messages":[]}`), DefaultMaxOutputTokens, nil)
	four, r4 := prepare(e, []byte(`{"model":"m","max_completion_tokens":1000,"n":4,"messages":[]}`), DefaultMaxOutputTokens, nil)
	if r1 != nil || r4 != nil {
		t.Fatalf("refused: %v %v", r1, r4)
	}
	if one.bound < 1000 || four.bound-one.bound < 3000 || four.bound-one.bound > 3010 {
		t.Fatalf("bound of one choice %d, of four %d: want three more output caps", one.bound, four.bound)
	}
}
