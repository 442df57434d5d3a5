package protocol

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"time"
)

// Spans: a flock's spans leave it through the gateway, its one route out,
// and only when an OTLP endpoint is configured (flock:otlp.endpoint). The
// gateway exports its own (one per model call) and those the services
// derive from what crosses the bus (a task as the operator sent it, a task
// as its agent ran it), which they publish on SpansSubject in batches:
// IDs, names, times and statuses, never a body.
const (
	SpansSubject = "flock.spans"
	// HeaderParentSpan is the operator's caller's span ID (16 hex) on a
	// task message whose trace the caller gave (TRACEPARENT): the parent
	// of the operator's send span, which the header traceparent names.
	HeaderParentSpan = "Flock-Parent-Span"
	// EnvServicesSpans ("on") makes the services derive spans and publish
	// them on SpansSubject.
	EnvServicesSpans = "FLOCK_SERVICES_SPANS"
	// MaxSpansPerBatch bounds one message on SpansSubject.
	MaxSpansPerBatch = 256
)

// Span kinds (OpenTelemetry's).
const (
	SpanProducer = "producer" // the operator sending a task
	SpanConsumer = "consumer" // an agent running a task
	SpanServer   = "server"   // the gateway serving a model call
)

// Span is one finished span as the flock carries it.
type Span struct {
	Trace  string            `json:"trace"`            // 32 lowercase hex
	ID     string            `json:"id"`               // 16 lowercase hex
	Parent string            `json:"parent,omitempty"` // 16 lowercase hex; "": a root span
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`
	Start  time.Time         `json:"start"`
	End    time.Time         `json:"end"`
	Error  string            `json:"error,omitempty"` // set: the span ended in error, with this description
	Attrs  map[string]string `json:"attrs,omitempty"`
}

// SpanBatch is one message on SpansSubject.
type SpanBatch struct {
	V     int    `json:"v"`
	Spans []Span `json:"spans"`
}

// Check reports what is wrong with a span received over the bus.
func (s Span) Check() error {
	if !ValidTraceID(s.Trace) {
		return fmt.Errorf("span: trace %q is not 32 lowercase hex digits, not all zero", s.Trace)
	}
	if !ValidSpanID(s.ID) {
		return fmt.Errorf("span: id %q is not 16 lowercase hex digits, not all zero", s.ID)
	}
	if s.Parent != "" && !ValidSpanID(s.Parent) {
		return fmt.Errorf("span: parent %q is not 16 lowercase hex digits, not all zero", s.Parent)
	}
	switch s.Kind {
	case SpanProducer, SpanConsumer, SpanServer:
	default:
		return fmt.Errorf("span: kind %q is not %s, %s or %s", s.Kind, SpanProducer, SpanConsumer, SpanServer)
	}
	if s.Name == "" || len(s.Name) > 200 {
		return fmt.Errorf("span: name must be 1 to 200 bytes (got %d)", len(s.Name))
	}
	if s.Start.IsZero() || s.End.Before(s.Start) {
		return fmt.Errorf("span: start %s and end %s: want a start, and an end not before it", s.Start, s.End)
	}
	return nil
}

// isHex reports whether s is n bytes in lowercase hex, not all zero.
func isHex(s string, n int) bool {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != n || s != fmt.Sprintf("%x", b) {
		return false
	}
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

// SpanHex is the span ID in hex.
func (tp TraceParent) SpanHex() string { return hex.EncodeToString(tp.SpanID[:]) }

// CheckOTLPEndpoint is the rule for an OTLP/HTTP endpoint: an http or
// https URL with a host, no user or password (a collector's credentials
// would sit in plain config), no query or fragment. Its path is the traces
// path; none means /v1/traces.
func CheckOTLPEndpoint(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http:// or https:// URL (OTLP/HTTP), got %q", s)
	case u.Hostname() == "":
		return fmt.Errorf("has no host: %q", s)
	case u.User != nil:
		return fmt.Errorf("must not carry a user or password (it would be plain config): %q", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return fmt.Errorf("must have no query or fragment: %q", s)
	}
	return nil
}
