// Package tracing exports a flock's spans over OTLP/HTTP (OpenTelemetry's
// exporter and batch processor), from the gateway: the flock's one route
// out. It takes finished spans as the flock carries them
// (protocol.Span): the gateway's own and those the services derive from
// the bus (Derive). Export never blocks a caller: a full queue drops spans,
// an endpoint that does not answer costs a warning a minute.
package tracing

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ai-flock/ai-flock/protocol"
)

// DefaultPath is the OTLP/HTTP traces path, used when the endpoint has none.
const DefaultPath = "/v1/traces"

// warnEvery bounds the warnings an unreachable endpoint causes.
const warnEvery = time.Minute

// Exporter sends spans to one OTLP/HTTP endpoint.
type Exporter struct {
	bsp      sdktrace.SpanProcessor
	res      *resource.Resource
	scope    instrumentation.Scope
	log      *slog.Logger
	exported atomic.Uint64
	failed   atomic.Uint64
}

// New makes an exporter to endpoint (protocol.CheckOTLPEndpoint's rule; DefaultPath when
// it has no path), naming service as the spans' service.name.
func New(endpoint, service string, log *slog.Logger) (*Exporter, error) {
	if err := protocol.CheckOTLPEndpoint(endpoint); err != nil {
		return nil, fmt.Errorf("otlp endpoint: %w", err)
	}
	u, _ := url.Parse(endpoint)
	if u.Path == "" || u.Path == "/" {
		u.Path = DefaultPath
	}
	if log == nil {
		log = slog.Default()
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithTimeout(10*time.Second),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: 15 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	// The SDK reports its errors to a global handler (stderr, not JSON):
	// ours go through warn below, once a minute.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Debug("opentelemetry", "err", err) }))
	e := &Exporter{
		res:   resource.NewSchemaless(attribute.String("service.name", service)),
		scope: instrumentation.Scope{Name: "github.com/ai-flock/ai-flock"},
		log:   log,
	}
	w := &warning{exporter: exp, log: log, endpoint: u.Redacted(), e: e}
	e.bsp = sdktrace.NewBatchSpanProcessor(w, sdktrace.WithBatchTimeout(time.Second), sdktrace.WithMaxQueueSize(4096))
	return e, nil
}

// Export queues a finished span; a malformed one is dropped with the reason.
func (e *Exporter) Export(s protocol.Span) error {
	stub, err := stubOf(s)
	if err != nil {
		return err
	}
	stub.Resource, stub.InstrumentationScope = e.res, e.scope
	e.bsp.OnEnd(stub.Snapshot())
	return nil
}

// Exported and Failed count the spans the endpoint took and those it did not.
func (e *Exporter) Exported() uint64 { return e.exported.Load() }
func (e *Exporter) Failed() uint64   { return e.failed.Load() }

// Shutdown sends what is queued, within ctx.
func (e *Exporter) Shutdown(ctx context.Context) error { return e.bsp.Shutdown(ctx) }

func stubOf(s protocol.Span) (tracetest.SpanStub, error) {
	if err := s.Check(); err != nil {
		return tracetest.SpanStub{}, err
	}
	var tid trace.TraceID
	var sid, pid trace.SpanID
	_, _ = hex.Decode(tid[:], []byte(s.Trace))
	_, _ = hex.Decode(sid[:], []byte(s.ID))
	stub := tracetest.SpanStub{
		Name:        s.Name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
		SpanKind:    kinds[s.Kind],
		StartTime:   s.Start,
		EndTime:     s.End,
		Status:      sdktrace.Status{Code: codes.Ok},
	}
	if s.Parent != "" {
		_, _ = hex.Decode(pid[:], []byte(s.Parent))
		stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled, Remote: true})
	}
	if s.Error != "" {
		stub.Status = sdktrace.Status{Code: codes.Error, Description: s.Error}
	}
	for _, k := range sortedKeys(s.Attrs) {
		stub.Attributes = append(stub.Attributes, attribute.String(k, s.Attrs[k]))
	}
	return stub, nil
}

var kinds = map[string]trace.SpanKind{
	protocol.SpanProducer: trace.SpanKindProducer,
	protocol.SpanConsumer: trace.SpanKindConsumer,
	protocol.SpanServer:   trace.SpanKindServer,
}

// warning counts what the endpoint took and warns, at most once a minute,
// when it did not.
type warning struct {
	exporter sdktrace.SpanExporter
	log      *slog.Logger
	endpoint string
	e        *Exporter
	every    paced
}

func (w *warning) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := w.exporter.ExportSpans(ctx, spans)
	if err == nil {
		w.e.exported.Add(uint64(len(spans)))
		return nil
	}
	w.e.failed.Add(uint64(len(spans)))
	if w.every.due() {
		w.log.Warn("spans not exported: the OTLP endpoint did not take them (tasks and calls go on; spans are dropped)",
			"endpoint", w.endpoint, "spans", len(spans), "failed_so_far", w.e.failed.Load(), "err", err)
	}
	return err
}

func (w *warning) Shutdown(ctx context.Context) error {
	return w.exporter.Shutdown(ctx)
}

// paced says yes at most once per warnEvery: a fault that repeats is one
// warning a minute, not a log flood.
type paced struct {
	mu   sync.Mutex
	last time.Time
}

func (p *paced) due() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.last.IsZero() && time.Since(p.last) < warnEvery {
		return false
	}
	p.last = time.Now()
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
