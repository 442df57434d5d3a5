// Package fakemodel is a fake model upstream that speaks the real wire
// formats: Anthropic Messages (POST /v1/messages), OpenAI chat completions
// (POST /v1/chat/completions) and Responses (POST /v1/responses), JSON or
// SSE as the request's "stream" asks, and the token-counting endpoints
// (POST /v1/messages/count_tokens, POST /v1/responses/input_tokens), which
// answer the input count and nothing else.
// It records what it was sent (Seen, GET /_fake/seen), and the request's
// model picks a hostile behaviour (the Model* constants), so a test can reach
// each one through the gateway.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/tests/otlprecv"
)

// Models that make the fake misbehave; any other model answers normally.
const (
	ModelMalformed     = "fake-malformed"      // 200, application/json, a body that is not JSON
	ModelHugeUsage     = "fake-huge-usage"     // usage near MaxInt64, and negative
	ModelGarbageStream = "fake-garbage-stream" // SSE with broken lines, a 1 MiB line, then the connection cut
	ModelSlow          = "fake-slow"           // waits Options.Slow: before a JSON answer, after a stream's first event
	ModelHangHeaders   = "fake-hang-headers"   // sends nothing until the client goes away
	ModelError         = "fake-error"          // 529 overloaded_error, as Anthropic sends it
	ModelHugeHeaders   = "fake-huge-headers"   // 200 with 256 KiB of response headers
)

// SeenPath serves Seen as JSON.
const SeenPath = "/_fake/seen"

// SpansPath serves the spans sent to its OTLP/HTTP receiver (POST
// /v1/traces) as JSON.
const SpansPath = "/_fake/spans"

// Options tune the fake. The zero value is a working fake.
type Options struct {
	Answer       string        // the text the model answers; default DefaultAnswer
	InputTokens  int64         // usage it reports; default 12
	OutputTokens int64         // default 7
	Slow         time.Duration // ModelSlow's pause; default 2 s
	// RequireKey, if set, is the only key accepted (x-api-key, or
	// Authorization: Bearer); anything else gets 401.
	RequireKey string
}

// DefaultAnswer is what the model says unless Options.Answer is set.
const DefaultAnswer = "hello from the fake model"

// Request is what the fake saw of one request.
type Request struct {
	Method        string `json:"method"`
	Path          string `json:"path"`
	APIKey        string `json:"x_api_key"`
	Authorization string `json:"authorization"`
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
}

// maxSeen bounds what a long-running fake remembers: the newest are kept.
const maxSeen = 10000

// Server is the fake, an http.Handler.
type Server struct {
	opts Options

	mu   sync.Mutex
	seen []Request
	// spans is an OTLP/HTTP receiver: the flock's collector in the e2e
	// test (flock:otlp.endpoint), on the same egress network.
	spans otlprecv.Receiver
}

// New returns a fake with opts' defaults filled in.
func New(opts Options) *Server {
	if opts.Answer == "" {
		opts.Answer = DefaultAnswer
	}
	if opts.InputTokens == 0 {
		opts.InputTokens = 12
	}
	if opts.OutputTokens == 0 {
		opts.OutputTokens = 7
	}
	if opts.Slow == 0 {
		opts.Slow = 2 * time.Second
	}
	return &Server{opts: opts}
}

// Seen is every request so far (but GET /_fake/seen), oldest first.
func (s *Server) Seen() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.seen...)
}

// request is the part of a request body the fake reads.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case SeenPath:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Seen())
		return
	case SpansPath:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.spans.Spans())
		return
	case otlprecv.Path:
		s.spans.ServeHTTP(w, r)
		return
	}
	var req request
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	s.record(Request{Method: r.Method, Path: r.URL.Path, APIKey: r.Header.Get("X-Api-Key"),
		Authorization: r.Header.Get("Authorization"), Model: req.Model, Stream: req.Stream})

	f, known := formats[r.URL.Path]
	if !known {
		f = anthropic
	}
	switch {
	case !known:
		f.error(w, http.StatusNotFound, "not_found_error", "Not found")
		return
	case r.Method != http.MethodPost:
		f.error(w, http.StatusMethodNotAllowed, "invalid_request_error", "Method not allowed")
		return
	case !s.keyOK(r):
		f.error(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	case err != nil:
		f.error(w, http.StatusBadRequest, "invalid_request_error", "the request body is not JSON: "+err.Error())
		return
	}
	s.serve(w, r, f, req)
}

func (s *Server) record(q Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == maxSeen {
		s.seen = append(s.seen[:0], s.seen[1:]...)
	}
	s.seen = append(s.seen, q)
}

func (s *Server) keyOK(r *http.Request) bool {
	k := s.opts.RequireKey
	return k == "" || r.Header.Get("X-Api-Key") == k || r.Header.Get("Authorization") == "Bearer "+k
}

// usage is what one answer reports.
type usage struct{ in, out, cacheWrite, cacheRead int64 }

func (s *Server) serve(w http.ResponseWriter, r *http.Request, f format, req request) {
	u := usage{in: s.opts.InputTokens, out: s.opts.OutputTokens}
	var pause time.Duration
	switch req.Model {
	case ModelMalformed:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_fake","usage":{"input_tokens":12,<html>not JSON`)
		return
	case ModelGarbageStream:
		s.garbage(w)
		return
	case ModelHangHeaders:
		<-r.Context().Done()
		return
	case ModelError:
		w.Header().Set("X-Should-Retry", "true")
		f.error(w, 529, "overloaded_error", "Overloaded")
		return
	case ModelHugeHeaders:
		for i := range 64 {
			w.Header().Set(fmt.Sprintf("X-Fake-Pad-%d", i), strings.Repeat("p", 4<<10))
		}
	case ModelHugeUsage:
		u = usage{in: math.MaxInt64 - 1, out: math.MaxInt64, cacheWrite: math.MaxInt64, cacheRead: -5}
	case ModelSlow:
		pause = s.opts.Slow
	}
	model := req.Model
	if model == "" {
		model = "fake-model"
	}
	a := answer{model: model, text: s.opts.Answer, usage: u, includeUsage: req.StreamOptions.IncludeUsage}
	if f.events == nil { // token counting: no answer, no stream, only the input's count
		req.Stream = false
	}
	if !req.Stream {
		if !wait(r, pause) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_fake")
		w.Write(f.message(a))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Request-Id", "req_fake")
	fl, _ := w.(http.Flusher)
	for i, ev := range f.events(a) {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if i == 0 && !wait(r, pause) {
			return
		}
	}
}

// wait pauses d unless the client goes away first (then false).
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// garbage is a stream a broken upstream might send: a good start, lines that
// are not SSE, an event whose JSON is cut, a 1 MiB line with no newline, and
// the connection cut without the chunked body's end.
func (s *Server) garbage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
	io.WriteString(w, "this is not SSE\r\r\n:\x00\xff\xfe\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":\n\ndata\n\n")
	io.WriteString(w, "data: "+strings.Repeat("x", 1<<20))
	if fl != nil {
		fl.Flush()
	}
	panic(http.ErrAbortHandler) // cut the connection: no final chunk
}
