package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/ai-flock/ai-flock/agent/tracing"
	"github.com/ai-flock/ai-flock/protocol"
)

// exportSpan hands the gateway's spans to the exporter.
func exportSpan(e *tracing.Exporter, log *slog.Logger) func(protocol.Span) {
	return func(s protocol.Span) {
		if err := e.Export(s); err != nil {
			log.Debug("span not exported", "err", err)
		}
	}
}

// shutdownSpans sends what is queued, within five seconds.
func shutdownSpans(e *tracing.Exporter, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		log.Warn("spans not all exported at stop", "err", err)
	}
}
