package tracing

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// DeriveConfig says how the services derive spans.
type DeriveConfig struct {
	// Subscribe adds a listener to a subject (the services' tap); nil: a
	// subscription of its own.
	Subscribe func(subject string, h nats.MsgHandler) (func(), error)
	// IsAgent says whether an ID is one of the flock's agents (nil: any).
	IsAgent func(string) bool
	// Every is how often a batch goes out (default one second).
	Every  time.Duration
	Logger *slog.Logger
}

// maxPending bounds the spans waiting for the next batch; past it new ones
// are dropped (and counted in the next warning).
const maxPending = 4096

// Deriver turns what crosses the bus into spans, as they end: a task as the
// operator sent it (a producer span, the traceparent the task message
// carries) and a task as its agent ran it (a consumer span, from its
// result), and publishes them on protocol.SpansSubject for the gateway to
// export. A task without a trace makes no span.
type Deriver struct {
	nc      *nats.Conn
	cfg     DeriveConfig
	mu      sync.Mutex
	pending []protocol.Span
	dropped int
	stops   []func()
	done    chan struct{}
	cancel  context.CancelFunc
}

// Derive starts deriving; Stop ends it, publishing what is pending.
func Derive(nc *nats.Conn, cfg DeriveConfig) (*Deriver, error) {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Deriver{nc: nc, cfg: cfg, done: make(chan struct{}), cancel: cancel}
	for _, subject := range []string{protocol.SubjectTasks, protocol.SubjectResults} {
		h := func(m *nats.Msg) { d.take(m.Subject, m.Header, m.Data) }
		var stop func()
		var err error
		if cfg.Subscribe != nil {
			stop, err = cfg.Subscribe(subject, h)
		} else {
			var sub *nats.Subscription
			if sub, err = nc.Subscribe(subject, h); err == nil {
				stop = func() { _ = sub.Unsubscribe() }
			}
		}
		if err != nil {
			cancel()
			d.unsubscribe()
			return nil, err
		}
		d.stops = append(d.stops, stop)
	}
	go d.loop(ctx)
	return d, nil
}

// Stop ends the subscriptions and publishes what is pending.
func (d *Deriver) Stop() {
	d.unsubscribe()
	d.cancel()
	<-d.done
}

func (d *Deriver) unsubscribe() {
	for _, stop := range d.stops {
		stop()
	}
	d.stops = nil
}

func (d *Deriver) loop(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			d.flush()
			return
		case <-t.C:
			d.flush()
		}
	}
}

func (d *Deriver) take(subject string, h nats.Header, data []byte) {
	s, ok := d.span(subject, h, data)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) >= maxPending {
		d.dropped++
		return
	}
	d.pending = append(d.pending, s)
}

// span is the span a message ends, if it ends one.
func (d *Deriver) span(subject string, h nats.Header, data []byte) (protocol.Span, bool) {
	t := strings.Split(subject, ".")
	switch {
	case t[0] == "tasks" && len(t) == 2:
		if h.Get(protocol.HeaderPoolSeq) != "" {
			return protocol.Span{}, false // the bus queuing a pool task again: no send of the operator's
		}
		tp, err := protocol.ParseTraceparent(h.Get(protocol.HeaderTraceparent))
		if err != nil {
			return protocol.Span{}, false
		}
		var task struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &task)
		now := time.Now().UTC()
		s := protocol.Span{Trace: tp.Trace(), ID: tp.SpanHex(), Parent: h.Get(protocol.HeaderParentSpan), Name: "task.send", Kind: protocol.SpanProducer,
			Start: now, End: now, Attrs: map[string]string{"flock.task.id": task.ID, "messaging.destination.name": subject}}
		return s, s.Check() == nil
	case len(t) == 3 && t[0] == "task" && t[1] == "result":
		if d.cfg.IsAgent != nil && !d.cfg.IsAgent(t[2]) {
			return protocol.Span{}, false
		}
		var r protocol.Result
		if json.Unmarshal(data, &r) != nil || r.Trace == "" {
			return protocol.Span{}, false
		}
		// The agent (the subject's, never the body's) reports its own span:
		// only IDs, times and the status are taken from it.
		s := protocol.Span{Trace: r.Trace, ID: r.Span, Parent: r.ParentSpan, Name: "task.run", Kind: protocol.SpanConsumer,
			Start: r.Started, End: r.Finished,
			Attrs: map[string]string{"flock.agent": t[2], "flock.task.id": r.TaskID, "flock.task.status": r.Status}}
		if !r.OK() {
			s.Error = "task " + r.Status
		}
		return s, s.Check() == nil
	}
	return protocol.Span{}, false
}

// flush publishes what is pending, as few messages as the bus's max
// payload allows (MaxSpansPerBatch at most in one).
func (d *Deriver) flush() {
	d.mu.Lock()
	spans, dropped := d.pending, d.dropped
	d.pending, d.dropped = nil, 0
	d.mu.Unlock()
	limit := int(d.nc.MaxPayload()) - 64
	var batch []json.RawMessage
	size := 0
	send := func() {
		if len(batch) == 0 {
			return
		}
		b, _ := json.Marshal(struct {
			V     int               `json:"v"`
			Spans []json.RawMessage `json:"spans"`
		}{protocol.Version, batch})
		if err := d.nc.Publish(protocol.SpansSubject, b); err != nil {
			d.cfg.Logger.Warn("spans not published", "spans", len(batch), "err", err)
		}
		batch, size = nil, 0
	}
	for _, s := range spans {
		b, _ := json.Marshal(s)
		if len(b) > limit {
			dropped++ // one span over the bus's max payload (a tiny flock:bus.maxPayloadKiB)
			continue
		}
		if size+len(b)+1 > limit || len(batch) == protocol.MaxSpansPerBatch {
			send()
		}
		batch, size = append(batch, b), size+len(b)+1
	}
	send()
	if dropped > 0 {
		d.cfg.Logger.Warn("spans dropped: more ended in a second than the services keep, or one was over the bus's max payload", "dropped", dropped, "kept", maxPending)
	}
}
