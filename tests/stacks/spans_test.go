package stacks_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// Span export on the dev stack: the services derive spans when an endpoint
// is set, and only then; no new network, port or container comes with it.
func TestDevSpanExport(t *testing.T) {
	on := devGateway(t, withGateway(capture.Config{"flock:otlp": `{"endpoint": "http://10.0.0.9:4318"}`}, ""))
	off := devGateway(t, withGateway(capture.Config{}, ""))
	svc := func(s *capture.Stack) map[string]string {
		c, ok := s.Get(capture.TypeContainer, "flock-services")
		if !ok {
			t.Fatal("no flock-services container")
		}
		return envOf(c)
	}
	if svc(on)[protocol.EnvServicesSpans] != "on" || svc(off)[protocol.EnvServicesSpans] != "" {
		t.Errorf("%s: with an endpoint %q, without %q", protocol.EnvServicesSpans, svc(on)[protocol.EnvServicesSpans], svc(off)[protocol.EnvServicesSpans])
	}
	for _, typ := range []string{capture.TypeContainer, capture.TypeNetwork} {
		if a, b := len(on.ByType(typ)), len(off.ByType(typ)); a != b {
			t.Errorf("%s: %d with span export, %d without", typ, a, b)
		}
	}
}
