package gateway

import (
	"encoding/json"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fake upstreams that answer in the real formats, and a gateway in front of
// them reached over a real listener, the caller known by 127.0.0.1.

const (
	anthropicKey = "sk-ant-REAL-KEY-4b1d"
	openaiKey    = "sk-openai-REAL-KEY-9c2e"
	dummyKey     = "sk-DUMMY-agent-key"
)

type seenRequest struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// fakeUpstream speaks Anthropic Messages (/v1/messages), OpenAI chat
// completions (/v1/chat/completions) and Responses (/v1/responses), JSON or
// SSE as the request's "stream" asks; /v1/malformed answers broken JSON.
type fakeUpstream struct {
	srv *httptest.Server

	// If hold is set, a stream stops after its first event, says so on
	// firstSent and waits until hold is closed.
	hold      chan struct{}
	firstSent chan struct{}

	mu   sync.Mutex
	seen []seenRequest
}

func newFakeUpstream(t testing.TB) *fakeUpstream {
	f := &fakeUpstream{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeUpstream) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
	f.mu.Unlock()
	var req struct {
		Stream    bool `json:"stream"`
		Malformed bool `json:"malformed"`
	}
	_ = json.Unmarshal(body, &req)
	w.Header().Set("Set-Cookie", "session=upstream-cookie")
	switch r.URL.Path {
	case "/v1/messages", "/v1/messages/count_tokens": // the same answer: benchmarks compare the two
		if req.Malformed {
			writeJSON(w, `{"id":"msg_01","usage":{"input_tokens":5,`)
			return
		}
		if req.Stream {
			f.stream(w, r, anthropicEvents)
			return
		}
		writeJSON(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x",
			"content":[{"type":"text","text":"Hello RESPONSE-MARKER"}],"stop_reason":"end_turn",
			"usage":{"input_tokens":11,"cache_creation_input_tokens":5,"cache_read_input_tokens":7,"output_tokens":23}}`)
	case "/v1/chat/completions":
		if req.Stream {
			f.stream(w, r, chatEvents)
			return
		}
		writeJSON(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-x",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Hi RESPONSE-MARKER"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":40,"completion_tokens":9,"total_tokens":49,"prompt_tokens_details":{"cached_tokens":30}}}`)
	case "/v1/responses":
		if req.Stream {
			f.stream(w, r, responsesEvents)
			return
		}
		writeJSON(w, `{"id":"resp_1","object":"response","status":"completed","output":[],
			"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":20},"output_tokens":6,"total_tokens":56}}`)
	case "/v1/malformed":
		writeJSON(w, `{"id":"msg_01","usage":{"input_tokens":5,`)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, body)
}

func (f *fakeUpstream) stream(w http.ResponseWriter, r *http.Request, events []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	for i, e := range events {
		io.WriteString(w, e)
		fl.Flush()
		if i == 0 && f.hold != nil {
			close(f.firstSent)
			select {
			case <-f.hold:
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				return // the test failed; do not hang its cleanup
			}
		}
	}
}

// The real event sequences, usage where each API puts it.
var anthropicEvents = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"stop_reason\":null,\"usage\":{\"input_tokens\":11,\"cache_creation_input_tokens\":5,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: ping\ndata: {\"type\": \"ping\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello \\\"usage\\\": RESPONSE-MARKER\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"!\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":23}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

var chatEvents = []string{
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi RESPONSE-MARKER\"}}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":9,\"total_tokens\":49,\"prompt_tokens_details\":{\"cached_tokens\":30}}}\n\n",
	"data: [DONE]\n\n",
}

var responsesEvents = []string{
	"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hi RESPONSE-MARKER\"}\n\n",
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":50,\"input_tokens_details\":{\"cached_tokens\":20},\"output_tokens\":6,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":56}}}\n\n",
}

// testGateway is a gateway on a real listener in front of a fake upstream,
// known as "anthropic" (x-api-key) and "openai" (Authorization: Bearer, base
// path /v1), with its log and reported usage captured.
type testGateway struct {
	gw   *Handler
	url  string
	up   *fakeUpstream
	logs *syncBuffer

	mu    sync.Mutex
	usage []Usage
}

func newTestGateway(t testing.TB, edit func(*Config)) *testGateway {
	t.Helper()
	tg := &testGateway{up: newFakeUpstream(t), logs: &syncBuffer{}}
	cfg := Config{
		Upstreams: map[string]Upstream{
			"anthropic": {URL: tg.up.srv.URL, KeyHeader: "x-api-key", Key: anthropicKey},
			"openai":    {URL: tg.up.srv.URL + "/v1", KeyHeader: "Authorization", KeyPrefix: "Bearer ", Key: openaiKey},
		},
		CallerOf: func(a netip.Addr) (string, bool) {
			if a == netip.MustParseAddr("127.0.0.1") {
				return "agent-1", true
			}
			return "", false
		},
		Logger: slog.New(slog.NewJSONHandler(tg.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnUsage: func(u Usage) {
			tg.mu.Lock()
			tg.usage = append(tg.usage, u)
			tg.mu.Unlock()
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tg.gw = gw
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	tg.url = srv.URL
	return tg
}

func (tg *testGateway) reported() []Usage {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]Usage(nil), tg.usage...)
}

// post sends body to the gateway as a stock SDK would, dummy key included,
// and returns the status, headers and whole body.
func (tg *testGateway) post(t *testing.T, path, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("POST", tg.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", dummyKey)
	req.Header.Set("Authorization", "Bearer "+dummyKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// errorBody decodes the gateway's own error answer.
func errorBody(t *testing.T, body string) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil {
		t.Fatalf("not an error body: %q (%v)", body, err)
	}
	return e.Error
}

// syncBuffer is the captured log.
type syncBuffer struct{ syncbuf.Buffer }

// lines are the captured log's JSON objects.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}
