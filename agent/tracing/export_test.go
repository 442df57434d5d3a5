package tracing_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ai-flock/ai-flock/agent/tracing"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/otlprecv"
	"github.com/ai-flock/ai-flock/tests/syncbuf"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

const (
	trace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent = "00f067aa0ba902b7"
	span   = "b7ad6b7169203331"
)

// Spans handed to the exporter reach an OTLP/HTTP receiver as they were
// given: IDs, parent, kind, name, status, attributes, the service's name.
func TestSpansReachAnOTLPReceiver(t *testing.T) {
	recv := otlprecv.Start(t)
	e, err := tracing.New(recv.URL, "flock-gateway", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second).UTC()
	for _, s := range []protocol.Span{
		{Trace: trace, ID: span, Parent: parent, Name: "task.run", Kind: protocol.SpanConsumer, Start: start, End: start.Add(time.Second),
			Attrs: map[string]string{"flock.agent": "agent-1"}},
		{Trace: trace, ID: "1111111111111111", Parent: span, Name: "gateway anthropic", Kind: protocol.SpanServer, Start: start, End: start, Error: "status 429"},
	} {
		if err := e.Export(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := recv.Spans()
	if len(got) != 2 || recv.Bad() != 0 {
		t.Fatalf("received %d spans (%d requests refused): %+v", len(got), recv.Bad(), got)
	}
	run, call := got[0], got[1]
	if run.Name != "task.run" {
		run, call = call, run
	}
	if run.Trace != trace || run.ID != span || run.Parent != parent || run.Kind != tracepb.Span_SPAN_KIND_CONSUMER || run.Error ||
		run.Attrs["flock.agent"] != "agent-1" || run.Service != "flock-gateway" || run.EndNano-run.StartNano != uint64(time.Second) {
		t.Errorf("task span: %+v", run)
	}
	if call.Parent != span || call.Kind != tracepb.Span_SPAN_KIND_SERVER || !call.Error {
		t.Errorf("gateway span: %+v", call)
	}
	if e.Exported() != 2 || e.Failed() != 0 {
		t.Errorf("exported %d, failed %d; want 2, 0", e.Exported(), e.Failed())
	}
}

// A malformed span is refused with the reason; an endpoint that is not a
// plain http(s) URL is refused at the start, naming the rule.
func TestBadSpansAndEndpointsAreRefused(t *testing.T) {
	for _, bad := range []string{"ftp://x:4318", "collector:4318", "http://user:pw@c:4318", "http://c:4318/v1/traces?x=1", "http://"} {
		if _, err := tracing.New(bad, "s", nil); err == nil || !strings.Contains(err.Error(), "otlp endpoint") {
			t.Errorf("endpoint %q: %v", bad, err)
		}
	}
	e, err := tracing.New("http://127.0.0.1:1", "s", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	now := time.Now()
	for _, s := range []protocol.Span{
		{Trace: strings.ToUpper(trace), ID: span, Name: "n", Kind: protocol.SpanServer, Start: now, End: now},
		{Trace: trace, ID: "0000000000000000", Name: "n", Kind: protocol.SpanServer, Start: now, End: now},
		{Trace: trace, ID: span, Parent: "x", Name: "n", Kind: protocol.SpanServer, Start: now, End: now},
		{Trace: trace, ID: span, Name: "n", Kind: "client", Start: now, End: now},
		{Trace: trace, ID: span, Name: "", Kind: protocol.SpanServer, Start: now, End: now},
		{Trace: trace, ID: span, Name: "n", Kind: protocol.SpanServer, Start: now, End: now.Add(-time.Second)},
	} {
		if err := e.Export(s); err == nil || !strings.HasPrefix(err.Error(), "span: ") {
			t.Errorf("span %+v: %v", s, err)
		}
	}
}

// An endpoint that does not answer costs a warning, not a blocked caller:
// Export returns at once however many spans wait, and the spans are
// counted as failed.
func TestAnUnreachableEndpointWarnsAndNeverBlocks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	var logs syncbuf.Buffer
	e, err := tracing.New("http://"+addr, "flock-gateway", slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	began := time.Now()
	for i := range 10000 { // more than the queue holds
		id := []byte(span)
		id[0] = "0123456789abcdef"[i%16]
		if err := e.Export(protocol.Span{Trace: trace, ID: string(id), Name: "n", Kind: protocol.SpanServer, Start: now, End: now}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("10000 exports took %s: Export blocked on the endpoint", took)
	}
	testkit.WaitFor(t, 30*time.Second, "the warning", func() bool {
		return strings.Contains(logs.String(), "spans not exported")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = e.Shutdown(ctx)
	if e.Failed() == 0 || e.Exported() != 0 {
		t.Fatalf("failed %d, exported %d", e.Failed(), e.Exported())
	}
	if n := strings.Count(logs.String(), "spans not exported"); n != 1 {
		t.Errorf("%d warnings, want one (one a minute):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), addr) {
		t.Errorf("the warning names neither its level nor the endpoint:\n%s", logs.String())
	}
}
