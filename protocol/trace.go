package protocol

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// Trace context (W3C Trace Context, version 00): a task carries one from
// the operator in the bus message's header HeaderTraceparent; the agent
// runs the task under a span of its own in the same trace and gives its
// process EnvTraceparent, which a program passes on (to the gateway, as
// the HTTP header of the same name).
const (
	HeaderTraceparent = "traceparent"
	EnvTraceparent    = "TRACEPARENT"
)

// TraceParent is a parsed traceparent: a trace, the span that is the
// parent, and the flags (bit 0: sampled).
type TraceParent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// ParseTraceparent reads a traceparent header value. Only version 00, in
// lowercase hex, with neither ID all zero, is accepted: what the standard
// says a receiver must drop is an error here, and a caller starts a trace
// of its own instead.
func ParseTraceparent(s string) (TraceParent, error) {
	var tp TraceParent
	parts := strings.Split(s, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return tp, fmt.Errorf("traceparent %q: want 00-<32 hex>-<16 hex>-<2 hex>", s)
	}
	if strings.ToLower(s) != s {
		return tp, fmt.Errorf("traceparent %q: hex must be lowercase", s)
	}
	var flags [1]byte
	if _, err := hex.Decode(tp.TraceID[:], []byte(parts[1])); err != nil {
		return tp, fmt.Errorf("traceparent %q: trace ID: %w", s, err)
	}
	if _, err := hex.Decode(tp.SpanID[:], []byte(parts[2])); err != nil {
		return tp, fmt.Errorf("traceparent %q: span ID: %w", s, err)
	}
	if _, err := hex.Decode(flags[:], []byte(parts[3])); err != nil {
		return tp, fmt.Errorf("traceparent %q: flags: %w", s, err)
	}
	tp.Flags = flags[0]
	if tp.TraceID == ([16]byte{}) || tp.SpanID == ([8]byte{}) {
		return tp, fmt.Errorf("traceparent %q: an all-zero ID is invalid", s)
	}
	return tp, nil
}

// NewTrace starts a trace: a random trace ID and root span, sampled.
func NewTrace() TraceParent {
	var tp TraceParent
	for tp.TraceID == ([16]byte{}) {
		_, _ = rand.Read(tp.TraceID[:])
	}
	tp.SpanID = newSpanID()
	tp.Flags = 1
	return tp
}

// Child is a new span in the same trace, with tp's flags.
func (tp TraceParent) Child() TraceParent {
	tp.SpanID = newSpanID()
	return tp
}

func newSpanID() [8]byte {
	var id [8]byte
	for id == ([8]byte{}) {
		_, _ = rand.Read(id[:])
	}
	return id
}

// String is the header value.
func (tp TraceParent) String() string {
	return "00-" + hex.EncodeToString(tp.TraceID[:]) + "-" + hex.EncodeToString(tp.SpanID[:]) + "-" + hex.EncodeToString([]byte{tp.Flags})
}

// Trace is the trace ID in hex, as logs and results name it.
func (tp TraceParent) Trace() string { return hex.EncodeToString(tp.TraceID[:]) }

// ValidTraceID and ValidSpanID say whether s is a W3C trace ID (32) or
// span ID (16) as the flock carries them: lowercase hex digits, not all
// zero. A body that names one is believed only then.
func ValidTraceID(s string) bool { return isHex(s, 16) }
func ValidSpanID(s string) bool  { return isHex(s, 8) }

// TraceIDOf is the trace ID of a traceparent header value, "" when it
// has none or a malformed one (nothing is guessed from it).
func TraceIDOf(traceparent string) string {
	tp, err := ParseTraceparent(traceparent)
	if err != nil {
		return ""
	}
	return tp.Trace()
}
