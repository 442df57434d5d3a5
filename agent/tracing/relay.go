package tracing

import (
	"encoding/json"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Relay exports the spans the services publish on the bus. Only the
// services may publish there (the bus's permissions); a malformed span is
// dropped all the same, and counted in one warning a minute.
func Relay(nc *nats.Conn, e *Exporter, log *slog.Logger) (func(), error) {
	var bad atomic.Uint64
	var every paced
	sub, err := nc.Subscribe(protocol.SpansSubject, func(m *nats.Msg) {
		var b protocol.SpanBatch
		err := json.Unmarshal(m.Data, &b)
		for _, s := range b.Spans {
			if serr := e.Export(s); serr != nil {
				err = serr
			}
		}
		if err != nil {
			bad.Add(1)
			if every.due() {
				log.Warn("spans from the bus dropped", "subject", protocol.SpansSubject, "bad_messages_so_far", bad.Load(), "err", err)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
