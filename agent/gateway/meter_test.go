package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// Every format, JSON and streamed, through the gateway: the agent gets the
// upstream's body whole and the usage is counted as the API reports it.
func TestMeteredFormats(t *testing.T) {
	anthropic := Usage{InputTokens: 11 + 5 + 7, OutputTokens: 23, CacheReadTokens: 7, CacheWriteTokens: 5, Total: 46}
	chat := Usage{InputTokens: 40, OutputTokens: 9, CacheReadTokens: 30, Total: 49}
	responses := Usage{InputTokens: 50, OutputTokens: 6, CacheReadTokens: 20, Total: 56}
	for _, tc := range []struct {
		name, path, body, wantTail, upstream string
		want                                 Usage
	}{
		{"anthropic json", "/anthropic/v1/messages", `{}`, `"output_tokens":23}}`, "anthropic", anthropic},
		{"anthropic sse", "/anthropic/v1/messages", `{"stream":true}`, "data: {\"type\":\"message_stop\"}\n\n", "anthropic", anthropic},
		{"openai chat json", "/openai/chat/completions", `{}`, `"cached_tokens":30}}}`, "openai", chat},
		{"openai chat sse", "/openai/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`, "data: [DONE]\n\n", "openai", chat},
		{"openai responses json", "/openai/responses", `{}`, `"total_tokens":56}}`, "openai", responses},
		{"openai responses sse", "/openai/responses", `{"stream":true}`, "\"total_tokens\":56}}}\n\n", "openai", responses},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTestGateway(t, nil)
			st, _, body := tg.post(t, tc.path, tc.body)
			if st != 200 || !strings.HasSuffix(body, tc.wantTail) {
				t.Fatalf("status %d, body does not end with %q:\n%s", st, tc.wantTail, body)
			}
			want := tc.want
			want.Agent, want.Upstream, want.Status = "agent-1", tc.upstream, 200
			want.SpentTokens = want.Total // the agent's running total, this call included
			// The call is charged once the handler is done, a moment after
			// the agent has read the last byte.
			waitFor(t, func() bool { return len(tg.reported()) > 0 }, "the usage report")
			got := tg.reported()
			if len(got) == 1 {
				if got[0].Duration <= 0 {
					t.Errorf("reported a duration of %s", got[0].Duration)
				}
				got[0].Duration = 0 // how long it took is not the test's to know
			}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("reported %+v\nwant       %+v", got, want)
			}
			if s := tg.gw.Spent("agent-1"); s != want.Total {
				t.Errorf("spent %d, want %d", s, want.Total)
			}
			// A second call adds up.
			tg.post(t, tc.path, tc.body)
			waitFor(t, func() bool { return len(tg.reported()) == 2 }, "the second report")
			if s := tg.gw.Spent("agent-1"); s != 2*want.Total {
				t.Errorf("spent %d after two calls, want %d", s, 2*want.Total)
			}
			if s := tg.reported()[1].SpentTokens; s != 2*want.Total {
				t.Errorf("the second report says spent %d, want %d", s, 2*want.Total)
			}
		})
	}
}

// A body whose usage cannot be read passes through as it is, and the call is
// charged its bound: never nothing.
func TestMalformedJSONPassesThroughChargedItsBound(t *testing.T) {
	tg := newTestGateway(t, nil)
	st, _, body := tg.post(t, "/anthropic/v1/messages", `{"malformed":true}`)
	if st != 200 || body != `{"id":"msg_01","usage":{"input_tokens":5,` {
		t.Fatalf("the agent did not get the upstream's body as it was: %d %q", st, body)
	}
	waitFor(t, func() bool { return strings.Contains(tg.logs.String(), `"msg":"model call"`) }, "the access log")
	if s, want := tg.gw.Spent("agent-1"), boundOf(`{"malformed":true}`); s != want {
		t.Errorf("a malformed body was charged %d, want its bound %d", s, want)
	}
	// Reported as what it was charged, so the operator's view of spend
	// agrees with the ledger's.
	if u := tg.reported(); len(u) != 1 || u[0].Total != boundOf(`{"malformed":true}`) || u[0].InputTokens != 0 {
		t.Errorf("the bound charged was reported as %+v", u)
	}
	if !strings.Contains(tg.logs.String(), `"unmetered":"malformed JSON body`) {
		t.Errorf("the log does not say the body was malformed:\n%s", tg.logs.String())
	}
}

// meterAll passes body through a meter with the given headers, reading it
// one byte at a time, and checks the bytes come out unchanged.
func meterAll(t *testing.T, contentType, body string) (Usage, bool, string) {
	t.Helper()
	h := http.Header{"Content-Type": {contentType}}
	m := newMeter(h, io.NopCloser(iotest.OneByteReader(strings.NewReader(body))))
	out, err := io.ReadAll(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, []byte(body)) {
		t.Fatalf("the meter changed the body")
	}
	m.Close()
	return m.result()
}

// Events split across reads, CRLF line endings and a stream cut before its
// last blank line are all counted.
func TestMeterReadsStreamsInAnyPieces(t *testing.T) {
	stream := strings.Join(anthropicEvents, "")
	for name, body := range map[string]string{
		"lf":        stream,
		"crlf":      strings.ReplaceAll(stream, "\n", "\r\n"),
		"cut short": strings.TrimSuffix(strings.Join(anthropicEvents[:8], ""), "\n\n"),
	} {
		u, ok, problem := meterAll(t, "text/event-stream; charset=utf-8", body)
		if !ok || problem != "" || u.Total != 46 || u.OutputTokens != 23 {
			t.Errorf("%s: %+v ok=%v problem=%q", name, u, ok, problem)
		}
	}
	// The output so far is what a stream cut after message_start reports.
	u, ok, _ := meterAll(t, "text/event-stream", anthropicEvents[0])
	if !ok || u.OutputTokens != 1 || u.InputTokens != 23 {
		t.Errorf("cut after message_start: %+v ok=%v", u, ok)
	}
	// A multi-line data field is one event.
	u, ok, _ = meterAll(t, "text/event-stream", "data: {\"usage\":\ndata: {\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n")
	if !ok || u.Total != 7 {
		t.Errorf("multi-line data: %+v ok=%v", u, ok)
	}
}

func TestMeterLeavesOtherBodiesUnmetered(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body, problem string
	}{
		{"no usage", "application/json", `{"data":[{"id":"claude-x"}]}`, ""},
		{"error body", "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, ""},
		{"message is a string", "application/json", `{"message":"nope"}`, ""},
		{"array", "application/json", `[1,2]`, ""},
		{"empty", "application/json", ``, ""},
		{"text", "text/plain", `{"usage":{"input_tokens":5}}`, ""},
		{"wrong type", "application/json", `{"usage":{"input_tokens":"five"}}`, "malformed JSON body"},
		{"not json", "application/json", `<html>`, "malformed JSON body"},
		{"bad event", "text/event-stream", "data: {\"usage\":{\n\n", "malformed event"},
	} {
		u, ok, problem := meterAll(t, tc.ct, tc.body)
		if ok || !strings.HasPrefix(problem, tc.problem) || (tc.problem == "") != (problem == "") {
			t.Errorf("%s: %+v ok=%v problem=%q, want unmetered with problem %q", tc.name, u, ok, problem, tc.problem)
		}
	}
	// A compressed body is passed on, not metered, and said so.
	h := http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	m := newMeter(h, io.NopCloser(strings.NewReader(`{"usage":{"input_tokens":5}}`)))
	io.ReadAll(m)
	if _, ok, problem := m.result(); ok || !strings.Contains(problem, "gzip") {
		t.Errorf("gzip body: ok=%v problem=%q", ok, problem)
	}
}

// The meter may not keep a huge body: past its bound it stops counting, and
// the bytes still flow.
func TestMeterBoundsWhatItKeeps(t *testing.T) {
	big := `{"pad":"` + strings.Repeat("x", maxMeteredJSON) + `","usage":{"input_tokens":5,"output_tokens":1}}`
	h := http.Header{"Content-Type": {"application/json"}}
	m := newMeter(h, io.NopCloser(strings.NewReader(big)))
	n, _ := io.Copy(io.Discard, m)
	if n != int64(len(big)) {
		t.Fatalf("passed %d of %d bytes", n, len(big))
	}
	if m.json != nil {
		t.Errorf("the meter kept %d bytes past its bound", len(m.json))
	}
	if _, ok, problem := m.result(); ok || !strings.Contains(problem, "over") {
		t.Errorf("big body: ok=%v problem=%q", ok, problem)
	}
}
