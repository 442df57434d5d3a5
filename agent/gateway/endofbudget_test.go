package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// ledgers are the two the gateway meters with: in memory, and the bus's
// bucket (whose writes follow a settlement in the background).
func ledgers(t *testing.T) map[string]func() ledger.Ledger {
	return map[string]func() ledger.Ledger{
		"memory": func() ledger.Ledger { return ledger.NewMemory() },
		"bus": func() ledger.Ledger {
			f := bustest.Start(t, bustest.Agents(1))
			l, err := ledger.NewBus(f.Connect(t, protocol.GatewayUser), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // before the bus stops: nothing left to write
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = l.Drain(ctx)
			})
			return l
		},
	}
}

// sentBody is what an upstream call the fake saw asked for.
func sentBody(t *testing.T, r seenRequest) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("forwarded body %q: %v", r.Body, err)
	}
	return m
}

// A call that names no output cap, with fewer tokens left than the
// gateway's default cap: the cap written in is what is left (less the input
// estimate), so the call goes on; below the floor it is refused, as a spent
// budget is. A cap the agent named is forwarded as it is.
func TestDefaultCapFitsWhatIsLeft(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 2000} })
	body := `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`
	st, _, out := tg.post(t, "/anthropic/v1/messages", body)
	if st != 200 {
		t.Fatalf("first call of a 2,000-token budget, no max_tokens: %d %s", st, out)
	}
	want := 2000 - estimateInput([]byte(body))
	if got := sentBody(t, tg.up.requests()[0])["max_tokens"]; got != float64(want) {
		t.Errorf("max_tokens written in: %v, want %d (what is left less the input estimate)", got, want)
	}
	// The access line is written once the answer has ended, which the
	// client may see first.
	fitted := fmt.Sprintf("max_tokens set to %d to fit what is left of the budget", want)
	waitFor(t, func() bool { return strings.Contains(tg.logs.String(), fitted) }, "the access log saying the cap was fitted")
	// 46 spent: the next one fits what is left again; Chat Completions'
	// choices share it.
	chat := `{"model":"gpt-x","n":2,"messages":[{"role":"user","content":"hi"}]}`
	if st, _, out := tg.post(t, "/openai/chat/completions", chat); st != 200 {
		t.Fatalf("second call: %d %s", st, out)
	}
	wantChat := (2000 - 46 - estimateInput([]byte(chat))) / 2
	if got := sentBody(t, tg.up.requests()[1])["max_completion_tokens"]; got != float64(wantChat) {
		t.Errorf("max_completion_tokens for n=2: %v, want %d", got, wantChat)
	}
	// A cap the agent names is its own: forwarded unchanged, even past
	// what is left (admitted below the limit, as before).
	if st, _, out := tg.post(t, "/anthropic/v1/messages", `{"max_tokens":4096,"messages":[]}`); st != 200 {
		t.Fatalf("a named cap: %d %s", st, out)
	}
	if got := sentBody(t, tg.up.requests()[2])["max_tokens"]; got != 4096.0 {
		t.Errorf("a named max_tokens was changed to %v", got)
	}
	// Spent 46+49+46 = 141. With 150 left, the floor (256) does not fit:
	// refused, the upstream not called, not to be retried.
	tg2 := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 150 + 46} })
	if st, _, _ := tg2.post(t, "/anthropic/v1/messages", `{"max_tokens":64}`); st != 200 {
		t.Fatal(st)
	}
	st, h, out := tg2.post(t, "/anthropic/v1/messages", body)
	if st != http.StatusTooManyRequests || h.Get("X-Should-Retry") != "false" || !strings.Contains(out, "fewer than the") {
		t.Errorf("150 left, below the floor: %d %v %s, want 429 not to be retried", st, h, out)
	}
	if n := len(tg2.up.requests()); n != 1 {
		t.Errorf("the upstream was called %d times, want 1", n)
	}
	// A smaller floor lets it through with the 150 less the input.
	tg3 := newTestGateway(t, func(c *Config) {
		c.Budgets = map[string]int64{"agent-1": 150}
		c.MinFittedOutputTokens = 100
	})
	if st, _, out := tg3.post(t, "/openai/responses", body); st != 200 {
		t.Fatalf("150 left, floor 100: %d %s", st, out)
	}
	if got := sentBody(t, tg3.up.requests()[0])["max_output_tokens"]; got != float64(150-estimateInput([]byte(body))) {
		t.Errorf("max_output_tokens: %v", got)
	}
}

// lastByteWriter records, at each write, what the agent's ledger says: the
// spend the agent would see if it called again the moment it had read it.
type lastByteWriter struct {
	h     http.Header
	mu    sync.Mutex
	body  strings.Builder
	spent []int64 // after each write
	known func() int64
	code  int
}

func (w *lastByteWriter) Header() http.Header { return w.h }
func (w *lastByteWriter) WriteHeader(c int)   { w.code = c }
func (w *lastByteWriter) Flush()              {}
func (w *lastByteWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.body.Write(p)
	w.spent = append(w.spent, w.known())
	return len(p), nil
}

// A call's settlement is in the ledger before the last byte of its answer
// is written to the agent, plain or streamed, in every metered format and
// with either ledger: an agent that reads its answer whole and calls again
// finds it charged its cost, not its bound.
func TestAnswerSettledBeforeItsLastByte(t *testing.T) {
	calls := []struct{ path, body string }{
		{"/anthropic/v1/messages", `{"max_tokens":300,"messages":[]}`},
		{"/anthropic/v1/messages", `{"max_tokens":300,"stream":true,"messages":[]}`},
		{"/openai/chat/completions", `{"max_tokens":300,"messages":[]}`},
		{"/openai/chat/completions", `{"max_tokens":300,"stream":true,"messages":[]}`},
		{"/openai/responses", `{"max_output_tokens":300,"input":"hi"}`},
		{"/openai/responses", `{"max_output_tokens":300,"stream":true,"input":"hi"}`},
	}
	for name, mk := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			l := mk()
			b := ledger.Budget{Tokens: 1 << 30}
			tg := newTestGateway(t, func(c *Config) {
				c.Budgets = map[string]int64{"agent-1": b.Tokens}
				c.Ledger = l
			})
			var before int64
			for _, c := range calls {
				w := &lastByteWriter{h: http.Header{}, known: func() int64 { return l.Known("agent-1", b).Spent }}
				req := httptest.NewRequest("POST", c.path, strings.NewReader(c.body)).WithContext(context.Background())
				req.RemoteAddr = "127.0.0.1:40000"
				tg.gw.ServeHTTP(w, req)
				after := l.Known("agent-1", b).Spent
				if w.code != 0 && w.code != 200 || len(w.spent) == 0 {
					t.Fatalf("%s %s: status %d, %d writes", c.path, c.body, w.code, len(w.spent))
				}
				if at := w.spent[len(w.spent)-1]; at != after || after-before > 100 {
					t.Errorf("%s %s: when its last byte was written the ledger said %d, after the call %d (cost %d): settled too late",
						c.path, c.body, at, after, after-before)
				}
				before = after
			}
		})
	}
}

// An agent making one call at a time at the end of its budget, each answer
// read whole on a new connection, is never refused while the ledger has
// room: the call before it is settled at its cost by then. Once the budget
// is spent, the refusal is final.
func TestSequentialCallsAtTheEndOfABudget(t *testing.T) {
	for name, mk := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			l := mk()
			// Each call may take the whole budget (its max_tokens), so
			// every call after the first finds the one before it reserved
			// past the limit unless it was settled.
			const budget = 5000
			b := ledger.Budget{Tokens: budget}
			tg := newTestGateway(t, func(c *Config) {
				c.Budgets = map[string]int64{"agent-1": budget}
				c.Ledger = l
			})
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			bodies := []string{`{"max_tokens":5000,"messages":[]}`, `{"max_tokens":5000,"stream":true,"messages":[]}`}
			for i := 0; ; i++ {
				// What the ledger holds once every call before this one is
				// settled: 46 a call (the fake's usage).
				spent := int64(46 * i)
				room := spent < budget
				req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(bodies[i%2]))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var out strings.Builder
				_, _ = fmt.Fprint(&out, readAll(t, resp))
				switch {
				case room && resp.StatusCode != 200:
					t.Fatalf("call %d refused with %d of %d spent: %d x-should-retry %s %s", i, spent, budget, resp.StatusCode, resp.Header.Get("X-Should-Retry"), out.String())
				case !room && (resp.StatusCode != 429 || resp.Header.Get("X-Should-Retry") != "false"):
					t.Fatalf("call %d past the budget: %d %s, want a final 429", i, resp.StatusCode, out.String())
				case !room:
					if e := l.Known("agent-1", b).Spent; e != spent {
						t.Errorf("the ledger holds %d, want %d", e, spent)
					}
					return
				}
			}
		})
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// A refusal that the agent's own calls in flight explain (their bounds
// reserved, not yet settled) is retryable, with Retry-After; once they end
// the call goes through.
func TestRefusalForCallsInFlightIsRetryable(t *testing.T) {
	tg := newTestGateway(t, func(c *Config) { c.Budgets = map[string]int64{"agent-1": 600} })
	tg.up.hold, tg.up.firstSent = make(chan struct{}), make(chan struct{})
	done := make(chan int)
	go func() {
		st, _, _ := tg.post(t, "/anthropic/v1/messages", `{"max_tokens":600,"stream":true,"messages":[]}`)
		done <- st
	}()
	<-tg.up.firstSent
	st, h, out := tg.post(t, "/anthropic/v1/messages", `{"max_tokens":64,"messages":[]}`)
	if st != http.StatusTooManyRequests || h.Get("X-Should-Retry") != "true" || h.Get("Retry-After") == "" || !strings.Contains(out, "in flight") {
		t.Errorf("refused while a call holds the budget: %d %v %s, want 429 to be retried, with Retry-After", st, h, out)
	}
	close(tg.up.hold)
	if st := <-done; st != 200 {
		t.Fatalf("the call in flight: %d", st)
	}
	if st, _, out := tg.post(t, "/anthropic/v1/messages", `{"max_tokens":64,"messages":[]}`); st != 200 {
		t.Errorf("after the call in flight ended (46 spent): %d %s", st, out)
	}
}

// The floor is checked like every other field: named, with its rule.
func TestMinFittedOutputTokensValidated(t *testing.T) {
	for _, n := range []int64{-1, DefaultMaxOutputTokens + 1} {
		c := Config{CallerOf: func(netip.Addr) (string, bool) { return "", false }, MinFittedOutputTokens: n}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "minFittedOutputTokens: must be 0 to defaultMaxOutputTokens") {
			t.Errorf("MinFittedOutputTokens %d: %v", n, err)
		}
	}
	c := Config{CallerOf: func(netip.Addr) (string, bool) { return "", false }, DefaultMaxOutputTokens: 100, MinFittedOutputTokens: 100}
	if err := c.Validate(); err != nil {
		t.Errorf("a floor equal to the default cap: %v", err)
	}
}
