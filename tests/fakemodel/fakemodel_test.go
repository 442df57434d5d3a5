package fakemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func start(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	f := New(opts)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	return do(t, req)
}

// do sends req; its answer's body is closed when the test ends.
func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// event is one SSE event as a client reads it.
type event struct {
	name string
	data string
}

// readSSE is a small SSE reader after the spec: "field: value" lines, data
// lines joined with \n, a blank line dispatches, comments skipped.
func readSSE(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	var cur event
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				cur.data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data = event{}, nil
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				cur.name = value
			case "data":
				data = append(data, value)
			default:
				t.Errorf("unexpected SSE field %q", line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 {
		t.Errorf("stream ended inside an event")
	}
	return out
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, s, err)
	}
	return v
}

// The Anthropic types, with every field the API sends (unknown fields fail
// the decode, so the shape is exact).
type anthUsage struct {
	InputTokens   *int64 `json:"input_tokens"`
	OutputTokens  *int64 `json:"output_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
}

type anthMessage struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"`
	Role         string            `json:"role"`
	Model        string            `json:"model"`
	Content      []json.RawMessage `json:"content"`
	StopReason   *string           `json:"stop_reason"`
	StopSequence *string           `json:"stop_sequence"`
	Usage        anthUsage         `json:"usage"`
}

func TestAnthropicMessage(t *testing.T) {
	f, url := start(t, Options{Answer: "the answer", RequireKey: "sk-fake"})
	resp := post(t, url+"/v1/messages", "sk-fake", `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	m := decode[anthMessage](t, string(body))
	if m.ID == "" || m.Type != "message" || m.Role != "assistant" || m.Model != "claude-x" ||
		m.StopReason == nil || *m.StopReason != "end_turn" || len(m.Content) != 1 {
		t.Errorf("message: %+v", m)
	}
	block := decode[struct{ Type, Text string }](t, string(m.Content[0]))
	if block.Type != "text" || block.Text != "the answer" {
		t.Errorf("content: %s", m.Content[0])
	}
	u := m.Usage
	if u.InputTokens == nil || *u.InputTokens != 12 || u.OutputTokens == nil || *u.OutputTokens != 7 ||
		u.CacheCreation == nil || *u.CacheCreation != 0 || u.CacheRead == nil || *u.CacheRead != 0 {
		t.Errorf("usage: %s", body)
	}
	want := []Request{{Method: "POST", Path: "/v1/messages", APIKey: "sk-fake", Model: "claude-x"}}
	if got := f.Seen(); !reflect.DeepEqual(got, want) {
		t.Errorf("seen %+v, want %+v", got, want)
	}
}

func TestAnthropicStream(t *testing.T) {
	_, url := start(t, Options{Answer: "one two three", InputTokens: 30, OutputTokens: 4})
	resp := post(t, url+"/v1/messages", "", `{"model":"claude-x","stream":true}`)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	events := readSSE(t, resp.Body)
	var names []string
	var text strings.Builder
	var input, output int64
	for _, ev := range events {
		names = append(names, ev.name)
		var d struct {
			Type    string `json:"type"`
			Message *struct {
				Usage anthUsage `json:"usage"`
			} `json:"message"`
			Delta struct{ Type, Text string } `json:"delta"`
			Usage *anthUsage                  `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
			t.Fatalf("event %s: %v", ev.name, err)
		}
		if d.Type != ev.name {
			t.Errorf("event %q has data type %q", ev.name, d.Type)
		}
		switch ev.name {
		case "message_start":
			input = *d.Message.Usage.InputTokens
		case "content_block_delta":
			if d.Delta.Type != "text_delta" {
				t.Errorf("delta type %q", d.Delta.Type)
			}
			text.WriteString(d.Delta.Text)
		case "message_delta":
			output = *d.Usage.OutputTokens
		}
	}
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("events %v\nwant   %v", names, want)
	}
	if text.String() != "one two three" || input != 30 || output != 4 {
		t.Errorf("text %q, input %d, output %d", text.String(), input, output)
	}
}

type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func TestOpenAIChat(t *testing.T) {
	f, url := start(t, Options{RequireKey: "sk-open"})
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-x","messages":[]}`))
	req.Header.Set("Authorization", "Bearer sk-open")
	resp := do(t, req)
	var c struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage chatUsage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if c.Object != "chat.completion" || c.Model != "gpt-x" || len(c.Choices) != 1 ||
		c.Choices[0].Message.Content != DefaultAnswer || c.Choices[0].FinishReason != "stop" ||
		c.Usage != (chatUsage{12, 7, 19}) {
		t.Errorf("completion %+v", c)
	}
	if s := f.Seen(); len(s) != 1 || s[0].Authorization != "Bearer sk-open" || s[0].APIKey != "" {
		t.Errorf("seen %+v", s)
	}
}

func TestOpenAIChatStream(t *testing.T) {
	_, url := start(t, Options{Answer: "a b"})
	for _, include := range []bool{false, true} {
		body := `{"model":"gpt-x","stream":true}`
		if include {
			body = `{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true}}`
		}
		events := readSSE(t, post(t, url+"/v1/chat/completions", "", body).Body)
		if len(events) == 0 || events[len(events)-1].data != "[DONE]" {
			t.Fatalf("include_usage %v: no [DONE]: %v", include, events)
		}
		var text strings.Builder
		var usages []chatUsage
		for _, ev := range events[:len(events)-1] {
			var c struct {
				Object  string `json:"object"`
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
				Usage *chatUsage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(ev.data), &c); err != nil || c.Object != "chat.completion.chunk" {
				t.Fatalf("chunk %s: %v", ev.data, err)
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
			if c.Usage != nil {
				if len(c.Choices) != 0 {
					t.Errorf("the usage chunk has choices: %s", ev.data)
				}
				usages = append(usages, *c.Usage)
			}
		}
		if text.String() != "a b" {
			t.Errorf("text %q", text.String())
		}
		switch {
		case include && (len(usages) != 1 || usages[0] != chatUsage{12, 7, 19}):
			t.Errorf("include_usage: usage chunks %+v", usages)
		case !include && len(usages) != 0:
			t.Errorf("usage without include_usage: %+v", usages)
		}
	}
}

func TestRequireKey(t *testing.T) {
	f, url := start(t, Options{RequireKey: "sk-right"})
	for _, key := range []string{"", "sk-wrong"} {
		resp := post(t, url+"/v1/messages", key, `{"model":"m"}`)
		body, _ := io.ReadAll(resp.Body)
		e := decode[struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}](t, string(body))
		if resp.StatusCode != 401 || e.Type != "error" || e.Error.Type != "authentication_error" {
			t.Errorf("key %q: %d %s", key, resp.StatusCode, body)
		}
	}
	if n := len(f.Seen()); n != 2 {
		t.Errorf("seen %d requests, want the 2 refused ones", n)
	}
	// What it saw is served as JSON.
	resp, err := http.Get(url + SeenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var seen []Request
	if err := json.NewDecoder(resp.Body).Decode(&seen); err != nil || len(seen) != 2 || seen[1].APIKey != "sk-wrong" {
		t.Errorf("GET %s: %+v %v", SeenPath, seen, err)
	}
}

func TestHostileModes(t *testing.T) {
	_, url := start(t, Options{Slow: 300 * time.Millisecond})
	t.Run("malformed", func(t *testing.T) {
		resp := post(t, url+"/v1/messages", "", `{"model":"fake-malformed"}`)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Valid(body) {
			t.Errorf("%d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	})
	t.Run("huge usage", func(t *testing.T) {
		body, _ := io.ReadAll(post(t, url+"/v1/messages", "", `{"model":"fake-huge-usage"}`).Body)
		m := decode[anthMessage](t, string(body))
		if *m.Usage.OutputTokens != math.MaxInt64 || *m.Usage.InputTokens < math.MaxInt64-1 || *m.Usage.CacheRead >= 0 {
			t.Errorf("usage %s", body)
		}
	})
	t.Run("garbage stream", func(t *testing.T) {
		resp := post(t, url+"/v1/messages", "", `{"model":"fake-garbage-stream","stream":true}`)
		body, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("the stream ended cleanly: want the connection cut")
		}
		if len(body) < 1<<20 || strings.HasSuffix(string(body), "\n") {
			t.Errorf("got %d bytes ending %q: want a 1 MiB line without newline", len(body), body[max(0, len(body)-10):])
		}
	})
	t.Run("slow", func(t *testing.T) {
		begin := time.Now()
		resp := post(t, url+"/v1/messages", "", `{"model":"fake-slow","stream":true}`)
		br := bufio.NewReader(resp.Body)
		if line, _ := br.ReadString('\n'); line != "event: message_start\n" || time.Since(begin) > 250*time.Millisecond {
			t.Errorf("first line %q after %v: want message_start at once", line, time.Since(begin))
		}
		rest, _ := io.ReadAll(br)
		if d := time.Since(begin); d < 300*time.Millisecond || !strings.HasSuffix(string(rest), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
			t.Errorf("slow stream: %v, %q", d, rest)
		}
		begin = time.Now()
		post(t, url+"/v1/messages", "", `{"model":"fake-slow"}`)
		if d := time.Since(begin); d < 300*time.Millisecond {
			t.Errorf("slow JSON answered after %v", d)
		}
	})
	t.Run("hang headers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/messages", strings.NewReader(`{"model":"fake-hang-headers"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("got an answer: %s", resp.Status)
		}
	})
	t.Run("error", func(t *testing.T) {
		resp := post(t, url+"/v1/messages", "", `{"model":"fake-error"}`)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 529 || string(body) != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` {
			t.Errorf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("huge headers", func(t *testing.T) {
		resp := post(t, url+"/v1/messages", "", `{"model":"fake-huge-headers"}`)
		n := 0
		for k, v := range resp.Header {
			n += len(k) + len(v[0])
		}
		if resp.StatusCode != 200 || n < 256<<10 {
			t.Errorf("%d, %d bytes of headers", resp.StatusCode, n)
		}
	})
}

func TestUnknownPathAndBadBody(t *testing.T) {
	_, url := start(t, Options{})
	if resp := post(t, url+"/v1/nothing", "", `{}`); resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	if resp := post(t, url+"/v1/messages", "", `{not json`); resp.StatusCode != 400 {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
}
