package protocol

import (
	"strings"
	"testing"
)

func TestTraceparentRoundTripsAndRefusesWhatW3CDrops(t *testing.T) {
	tp := NewTrace()
	back, err := ParseTraceparent(tp.String())
	if err != nil || back != tp {
		t.Fatalf("%s parsed as %+v, %v", tp, back, err)
	}
	c := tp.Child()
	if c.TraceID != tp.TraceID || c.SpanID == tp.SpanID || c.Flags != tp.Flags {
		t.Fatalf("child %s of %s", c, tp)
	}
	const ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if tp, err := ParseTraceparent(ok); err != nil || tp.Trace() != "4bf92f3577b34da6a3ce929d0e0e4736" || tp.String() != ok {
		t.Fatalf("the W3C example: %+v %v", tp, err)
	}
	for _, bad := range []string{
		"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // too few parts
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",       // another version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",       // uppercase
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",       // zero trace
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",       // zero span
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",       // not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nx: y", // a header smuggled in
	} {
		if _, err := ParseTraceparent(bad); err == nil || !strings.Contains(err.Error(), "traceparent") {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

// One rule for the IDs a body names: lowercase hex of the right length,
// not all zero; a header's trace ID only from a valid traceparent.
func TestTraceAndSpanIDRules(t *testing.T) {
	for s, want := range map[string]bool{
		"4bf92f3577b34da6a3ce929d0e0e4736": true, "4BF92F3577B34DA6A3CE929D0E0E4736": false,
		"00000000000000000000000000000000": false, "4bf92f3577b34da6a3ce929d0e0e473": false, "4bf92f3577b34da6a3ce929d0e0e473g": false,
	} {
		if ValidTraceID(s) != want {
			t.Errorf("ValidTraceID(%q) = %v", s, !want)
		}
	}
	for s, want := range map[string]bool{"00f067aa0ba902b7": true, "0000000000000000": false, "00f067aa0ba902b": false, "00F067AA0BA902B7": false} {
		if ValidSpanID(s) != want {
			t.Errorf("ValidSpanID(%q) = %v", s, !want)
		}
	}
	if got := TraceIDOf("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("TraceIDOf a valid header: %q", got)
	}
	if got := TraceIDOf("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"); got != "" {
		t.Errorf("TraceIDOf a header with a zero span: %q", got)
	}
}
