package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type respObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Status    string `json:"status"`
	Model     string `json:"model"`
	Output    []struct {
		ID, Type, Status, Role string
		Content                []struct {
			Type        string            `json:"type"`
			Text        string            `json:"text"`
			Annotations []json.RawMessage `json:"annotations"`
		} `json:"content"`
	} `json:"output"`
	Usage             *respUsage      `json:"usage"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
}

func (r respObject) text() string {
	var b strings.Builder
	for _, o := range r.Output {
		for _, c := range o.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Responses, plain: a completed response object, its text in one message
// and the usage where the API puts it (input, its cached part, output).
func TestOpenAIResponses(t *testing.T) {
	f, url := start(t, Options{RequireKey: "sk-open"})
	req, _ := http.NewRequest("POST", url+"/v1/responses", strings.NewReader(`{"model":"gpt-x","input":"hi"}`))
	req.Header.Set("Authorization", "Bearer sk-open")
	resp := do(t, req)
	var r respObject
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if r.Object != "response" || r.Status != "completed" || r.Model != "gpt-x" || r.text() != DefaultAnswer ||
		r.Usage == nil || r.Usage.InputTokens != 12 || r.Usage.OutputTokens != 7 || r.Usage.TotalTokens != 19 {
		t.Errorf("response %+v", r)
	}
	if s := f.Seen(); len(s) != 1 || s[0].Path != "/v1/responses" || s[0].Authorization != "Bearer sk-open" {
		t.Errorf("seen %+v", s)
	}
	req, _ = http.NewRequest("POST", url+"/v1/responses", strings.NewReader(`{"model":"gpt-x","input":"hi"}`))
	if resp := do(t, req); resp.StatusCode != 401 {
		t.Errorf("without the key: %d", resp.StatusCode)
	}
}

// Responses, streamed: every event named in its event: line and in its
// type, numbered from 0, the text in deltas, the usage only in
// response.completed, which ends the stream.
func TestOpenAIResponsesStream(t *testing.T) {
	_, url := start(t, Options{Answer: "a b"})
	events := readSSE(t, post(t, url+"/v1/responses", "", `{"model":"gpt-x","stream":true,"input":"hi"}`).Body)
	var names []string
	var text strings.Builder
	var final respObject
	for i, ev := range events {
		var e struct {
			Type     string      `json:"type"`
			Seq      int         `json:"sequence_number"`
			Delta    string      `json:"delta"`
			Response *respObject `json:"response"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.name || e.Seq != i {
			t.Fatalf("event %d %q: %s (%v)", i, ev.name, ev.data, err)
		}
		names = append(names, e.Type)
		if e.Type == "response.output_text.delta" {
			text.WriteString(e.Delta)
		}
		if e.Response != nil && e.Type != "response.completed" && e.Response.Usage != nil {
			t.Errorf("usage before response.completed: %s", ev.data)
		}
		if e.Type == "response.completed" {
			final = *e.Response
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done " +
		"response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events:\n%s\nwant\n%s", got, want)
	}
	if text.String() != "a b" || final.text() != "a b" || final.Status != "completed" ||
		final.Usage == nil || final.Usage.InputTokens != 12 || final.Usage.OutputTokens != 7 {
		t.Errorf("text %q, final %+v", text.String(), final)
	}
}

// The token-counting endpoints answer the input's count, never a stream,
// and demand the key like the rest.
func TestCountTokens(t *testing.T) {
	f, url := start(t, Options{RequireKey: "sk-k", InputTokens: 33})
	resp := post(t, url+"/v1/messages/count_tokens", "sk-k", `{"model":"claude-x","stream":true,"messages":[]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	a := decode[struct {
		InputTokens int64 `json:"input_tokens"`
	}](t, readAllString(t, resp))
	if a.InputTokens != 33 {
		t.Errorf("count_tokens: %+v", a)
	}
	req, _ := http.NewRequest("POST", url+"/v1/responses/input_tokens", strings.NewReader(`{"model":"gpt-x","input":"hi"}`))
	req.Header.Set("Authorization", "Bearer sk-k")
	resp = do(t, req)
	o := decode[struct {
		Object      string `json:"object"`
		InputTokens int64  `json:"input_tokens"`
	}](t, readAllString(t, resp))
	if resp.StatusCode != 200 || o.Object != "response.input_tokens" || o.InputTokens != 33 {
		t.Errorf("input_tokens: %d %+v", resp.StatusCode, o)
	}
	if resp := post(t, url+"/v1/messages/count_tokens", "wrong", `{}`); resp.StatusCode != 401 {
		t.Errorf("count_tokens without the key: %d", resp.StatusCode)
	}
	if s := f.Seen(); len(s) != 3 || s[0].Path != "/v1/messages/count_tokens" || s[1].Path != "/v1/responses/input_tokens" {
		t.Errorf("seen %+v", s)
	}
}

func readAllString(t *testing.T, resp *http.Response) string {
	t.Helper()
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
