// Package audit is the flock's audit trail: a writer (run by flock-services)
// that derives one entry from each thing done on the bus and appends it,
// hash-chained, to protocol.AuditStream; the reading and verifying the
// operator's CLI does (read.go, verify.go).
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// Config is what the writer needs beside the connection.
type Config struct {
	// IsAgent says whether id is an agent of the flock: a subject naming
	// one it does not have makes no entry. Agents lists them now: the
	// writer listens to their inboxes (SetAgents follows changes).
	IsAgent func(id string) bool
	Agents  func() []string
	// Subscribe listens to a subject (nil: a subscription of the
	// writer's own); the returned func stops it.
	Subscribe func(subject string, h nats.MsgHandler) (func(), error)
	// AnchorEvery and RetainEvery pace the anchoring of the head and the
	// removal of what retention let go (0: protocol.AuditAnchorEvery, a
	// minute).
	AnchorEvery, RetainEvery time.Duration
	// Linger is how long the writer lets entries gather before it
	// appends them (0: DefaultLinger; below 0: none).
	Linger time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// queued is a message the writer has yet to append.
type queued struct {
	subject string
	header  nats.Header
	data    []byte
	at      time.Time // when it crossed: the entry's time
}

// maxQueued bounds what waits for the writer; past it, messages are
// counted as missed and the next entry says how many.
const maxQueued = 1 << 16

// DefaultLinger is how long entries gather before they are appended.
const DefaultLinger = 50 * time.Millisecond

// maxTries bounds the appends of one batch.
const maxTries = 10

// maxBatch bounds the entries sealed at once.
const maxBatch = 1024

// maxChunk bounds one message of the stream: the entries of a batch go in
// as few messages as fit (JSON lines), so that the trail costs the bus a
// store write per batch, not per entry.
const maxChunk = 60 << 10

// Writer is the running audit writer.
type Writer struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	cfg    Config
	log    *slog.Logger
	d      deriver
	keep   time.Duration

	in     chan queued
	mu     sync.Mutex
	missed int

	head     protocol.AuditAnchor // the last entry appended
	last     uint64               // the stream sequence of the message holding it
	chunk    int                  // the most bytes of entries one message holds
	anchored uint64

	subs    []func()
	subsMu  sync.Mutex
	inboxes map[string]func() // by agent
	stop    context.CancelFunc
	done    chan struct{}
}

// Start finds the trail's head (the last entry, or retention's checkpoint
// when it removed them all), subscribes to what it derives entries from,
// appends an entry saying it started, and writes until Stop.
func Start(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg Config) (*Writer, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AnchorEvery <= 0 {
		cfg.AnchorEvery = protocol.AuditAnchorEvery
	}
	if cfg.RetainEvery <= 0 {
		cfg.RetainEvery = time.Minute
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s: %w", protocol.AuditStream, err)
	}
	kv, err := js.KeyValue(ctx, protocol.AuditAnchorsBucket)
	if err != nil {
		return nil, fmt.Errorf("audit: bucket %s: %w", protocol.AuditAnchorsBucket, err)
	}
	w := &Writer{nc: nc, js: js, stream: stream, kv: kv, cfg: cfg, log: log, in: make(chan queued, 8192), done: make(chan struct{}),
		inboxes: map[string]func(){},
		d:       deriver{isAgent: cfg.IsAgent, ledger: map[string]ledgerState{}}}
	if w.keep, err = retention(stream.CachedInfo().Config); err != nil {
		return nil, err
	}
	w.chunk = int(min(int64(maxChunk), nc.MaxPayload()-2<<10, int64(stream.CachedInfo().Config.MaxMsgSize)))
	if err := w.resync(ctx); err != nil {
		return nil, err
	}
	w.anchored = w.head.Seq
	for _, subj := range Subjects {
		stop, err := w.subscribe(subj)
		if err != nil {
			w.unsubscribe()
			return nil, err
		}
		w.subs = append(w.subs, stop)
	}
	if cfg.Agents != nil {
		if err := w.SetAgents(cfg.Agents()); err != nil {
			w.unsubscribe()
			return nil, err
		}
	}
	run, stop := context.WithCancel(context.Background())
	w.stop = stop
	w.in <- queued{at: cfg.Now()} // the writer's own entry: it started
	go w.loop(run)
	return w, nil
}

// retention reads the stream's retention from its metadata.
func retention(c jetstream.StreamConfig) (time.Duration, error) {
	v, ok := c.Metadata[protocol.AuditRetentionMeta]
	if !ok {
		return protocol.DefaultAuditRetention, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("audit: stream %s: metadata %s is %q: want a duration above 0", protocol.AuditStream, protocol.AuditRetentionMeta, v)
	}
	return d, nil
}

// take queues a message for the writer; it never blocks the connection.
func (w *Writer) take(m *nats.Msg) {
	select {
	case w.in <- queued{subject: m.Subject, header: m.Header, data: m.Data, at: w.cfg.Now()}:
	default:
		w.mu.Lock()
		w.missed++
		w.mu.Unlock()
	}
}

// Stop stops listening, appends what was queued, and returns.
func (w *Writer) Stop() {
	w.unsubscribe()
	w.stop()
	<-w.done
}

func (w *Writer) unsubscribe() {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	for _, stop := range w.subs {
		stop()
	}
	w.subs = nil
	for id, stop := range w.inboxes {
		stop()
		delete(w.inboxes, id)
	}
}

// subscribe has take listen to subject.
func (w *Writer) subscribe(subject string) (func(), error) {
	if w.cfg.Subscribe != nil {
		stop, err := w.cfg.Subscribe(subject, w.take)
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		return stop, nil
	}
	sub, err := w.nc.Subscribe(subject, w.take)
	if err != nil {
		return nil, fmt.Errorf("audit: subscribe %s: %w", subject, err)
	}
	_ = sub.SetPendingLimits(maxQueued, 64<<20)
	return func() { _ = sub.Unsubscribe() }, nil
}

// SetAgents listens to the inboxes of ids, and of no other agent.
func (w *Writer) SetAgents(ids []string) error {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	want := map[string]bool{}
	var errs []error
	for _, id := range ids {
		want[id] = true
		if w.inboxes[id] != nil {
			continue
		}
		stop, err := w.subscribe(protocol.InboxOf(id))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w.inboxes[id] = stop
	}
	for id, stop := range w.inboxes {
		if !want[id] {
			stop()
			delete(w.inboxes, id)
		}
	}
	return errors.Join(errs...)
}

func (w *Writer) loop(run context.Context) {
	defer close(w.done)
	anchor := time.NewTicker(w.cfg.AnchorEvery)
	defer anchor.Stop()
	retain := time.NewTicker(w.cfg.RetainEvery)
	defer retain.Stop()
	w.retain(run)
	for {
		select {
		case <-run.Done():
			if !w.busBack(time.Second) {
				// Nothing queued can be written: stopping now, not after
				// the store's timeouts (a destroy stops bus and services
				// together).
				w.log.Warn("audit: stopping with the bus away: what was queued is not written", "queued", len(w.in), "head", w.head.Seq)
				return
			}
			w.drain()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			w.anchor(ctx)
			cancel()
			return
		case q := <-w.in:
			// What comes within the linger goes in the same messages:
			// under load, a store write per batch instead of per entry.
			if w.cfg.Linger > 0 {
				t := time.NewTimer(w.cfg.Linger)
				select {
				case <-t.C:
				case <-run.Done():
					t.Stop()
				}
			}
			w.append(run, w.batch(q))
		case <-anchor.C:
			w.anchor(run)
		case <-retain.C:
			w.retain(run)
		}
	}
}

// batch is q and whatever else is queued, up to maxBatch entries.
func (w *Writer) batch(q queued) []protocol.AuditEntry {
	var out []protocol.AuditEntry
	add := func(q queued) {
		if q.subject == "" {
			out = append(out, protocol.AuditEntry{Time: q.at.UTC(), Who: protocol.ServicesUser, Kind: protocol.AuditWriterStarted})
			return
		}
		if e, ok := w.d.derive(q.subject, q.header, q.data); ok {
			e.Time = q.at.UTC()
			out = append(out, e)
		}
	}
	add(q)
	for len(out) < maxBatch {
		select {
		case q := <-w.in:
			add(q)
		default:
			return w.withMissed(out)
		}
	}
	return w.withMissed(out)
}

// withMissed notes, in an entry of its own, the messages that found the
// queue full since the last batch.
func (w *Writer) withMissed(out []protocol.AuditEntry) []protocol.AuditEntry {
	w.mu.Lock()
	n := w.missed
	w.missed = 0
	w.mu.Unlock()
	if n > 0 {
		w.log.Error("audit: messages missed: the writer fell behind", "missed", n)
		out = append(out, protocol.AuditEntry{Time: w.cfg.Now().UTC(), Who: protocol.ServicesUser, Kind: protocol.AuditMissed, Outcome: fmt.Sprintf("%d entries lost", n)})
	}
	return out
}

// drain appends what is queued when the writer stops.
func (w *Writer) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case q := <-w.in:
			w.append(ctx, w.batch(q))
		default:
			return
		}
	}
}

// append seals the entries onto the head and publishes them, each
// expecting the one before it as the stream's last: a second writer, or a
// publish that failed, cannot fork the chain. On a failure the writer
// reads the head again and seals what was not stored onto it; after
// maxTries it gives them up, and the next entry says how many were lost.
func (w *Writer) append(ctx context.Context, entries []protocol.AuditEntry) {
	for try := 0; len(entries) > 0; try++ {
		if try == maxTries {
			w.log.Error("audit: entries lost: the trail refuses them (full?)", "entries", len(entries))
			w.mu.Lock()
			w.missed += len(entries)
			w.mu.Unlock()
			return
		}
		if try > 0 {
			if !pace.Sleep(ctx, time.Duration(min(try, 10))*200*time.Millisecond) {
				w.log.Error("audit: entries not appended: stopping", "entries", len(entries))
				return
			}
			if err := w.resync(ctx); err != nil {
				w.log.Warn("audit: head not read", "err", err)
				continue
			}
		}
		stored, err := w.publish(ctx, entries)
		entries = entries[stored:]
		if err != nil {
			w.log.Warn("audit: entries not appended yet", "left", len(entries), "err", err)
		}
	}
}

// readAnchor reads key of the anchors' bucket (nil: none written).
func readAnchor(ctx context.Context, kv jetstream.KeyValue, key string) (*protocol.AuditAnchor, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %s: %w", key, err)
	}
	var a protocol.AuditAnchor
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return nil, fmt.Errorf("audit: %s unreadable: %w", key, err)
	}
	return &a, nil
}
