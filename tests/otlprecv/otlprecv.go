// Package otlprecv is a minimal OTLP/HTTP trace receiver for tests: it
// takes POST /v1/traces (protobuf, as OpenTelemetry's exporter sends it)
// and keeps the spans it was sent.
package otlprecv

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its IDs in hex.
type Span struct {
	Service, Name, Trace, ID, Parent string
	Kind                             tracepb.Span_SpanKind
	Error                            bool
	Attrs                            map[string]string
	StartNano, EndNano               uint64
}

// Path is where OTLP/HTTP sends traces.
const Path = "/v1/traces"

// Receiver is the receiver, an http.Handler.
type Receiver struct {
	URL string // the endpoint, http://127.0.0.1:<port> (Start)
	mu  sync.Mutex
	got []Span
	bad int
}

// maxKept bounds the spans a receiver keeps (the oldest go first).
const maxKept = 10000

// Start serves on loopback until the test ends.
func Start(tb testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(r)
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var in coltrace.ExportTraceServiceRequest
	if req.Method != http.MethodPost || req.URL.Path != Path || req.Header.Get("Content-Type") != "application/x-protobuf" ||
		err != nil || proto.Unmarshal(body, &in) != nil {
		r.mu.Lock()
		r.bad++
		r.mu.Unlock()
		http.Error(w, "want POST /v1/traces, application/x-protobuf", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range in.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: service, Name: s.Name, Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
					Parent: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind, Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					Attrs: map[string]string{}, StartNano: s.StartTimeUnixNano, EndNano: s.EndTimeUnixNano}
				for _, a := range s.Attributes {
					sp.Attrs[a.Key] = a.GetValue().GetStringValue()
				}
				if len(r.got) == maxKept {
					r.got = append(r.got[:0], r.got[1:]...)
				}
				r.got = append(r.got, sp)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.got...)
}

// Bad counts the requests it refused.
func (r *Receiver) Bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}
