package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/fakemodel"
)

// Every endpoint the gateway forwards, driven against the fake model (the
// e2e flock's upstream): the metered ones charged the fake's 12 + 7 tokens,
// plain and streamed, the token counts forwarded and charged nothing.
func TestFakeModelDrivesEveryForwardedPath(t *testing.T) {
	fm := fakemodel.New(fakemodel.Options{RequireKey: anthropicKey, Answer: "the fake's answer"})
	srv := httptest.NewServer(fm)
	t.Cleanup(srv.Close)
	tg := newTestGateway(t, func(c *Config) {
		c.Upstreams = map[string]Upstream{
			"anthropic": {URL: srv.URL, KeyHeader: "x-api-key", Key: anthropicKey},
			"openai":    {URL: srv.URL + "/v1", KeyHeader: "Authorization", KeyPrefix: "Bearer ", Key: anthropicKey},
		}
		c.Budgets = map[string]int64{"agent-1": 1 << 30}
	})
	for _, c := range []struct {
		path, body string
		cost       int64 // 0: free
		answer     string
	}{
		{"/anthropic/v1/messages", `{"model":"m","max_tokens":64,"messages":[]}`, 19, "the fake's answer"},
		{"/anthropic/v1/messages", `{"model":"m","max_tokens":64,"stream":true,"messages":[]}`, 19, "answer"},
		{"/anthropic/v1/messages/count_tokens", `{"model":"m","messages":[]}`, 0, `"input_tokens":12`},
		{"/openai/chat/completions", `{"model":"m","messages":[]}`, 19, "the fake's answer"},
		{"/openai/chat/completions", `{"model":"m","stream":true,"messages":[]}`, 19, "answer"},
		{"/openai/responses", `{"model":"m","input":"hi"}`, 19, "the fake's answer"},
		{"/openai/responses", `{"model":"m","stream":true,"input":"hi"}`, 19, "response.completed"},
		{"/openai/responses/input_tokens", `{"model":"m","input":"hi"}`, 0, `"input_tokens":12`},
	} {
		before := tg.gw.Spent("agent-1")
		st, _, out := tg.post(t, c.path, c.body)
		if st != 200 || !strings.Contains(out, c.answer) {
			t.Errorf("%s %s: %d %s", c.path, c.body, st, out)
			continue
		}
		if got := tg.gw.Spent("agent-1") - before; got != c.cost {
			t.Errorf("%s %s: charged %d, want %d", c.path, c.body, got, c.cost)
		}
	}
	if n := len(fm.Seen()); n != 8 {
		t.Errorf("the fake saw %d calls, want 8", n)
	}
}
