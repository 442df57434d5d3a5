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

	"github.com/ai-flock/ai-flock/protocol"
)

// Config is what the writer needs beside the connection.
type Config struct {
	// IsAgent says whether id is an agent of the flock: a subject naming
	// one it does not have makes no entry. Agents lists them now: the
	// writer listens to their inboxes (SetAgents follows changes).
	IsAgent func(id string) bool
	Agents  func() []string
	// AnchorEvery and RetainEvery pace the anchoring of the head and the
	// removal of what retention let go (0: protocol.AuditAnchorEvery, a
	// minute).
	AnchorEvery, RetainEvery time.Duration
	Now                      func() time.Time
	Logger                   *slog.Logger
}

// queued is a message the writer has yet to append.
type queued struct {
	subject string
	header  nats.Header
	data    []byte
}

// maxQueued bounds what waits for the writer; past it, messages are
// counted as missed and the next entry says how many.
const maxQueued = 1 << 16

// maxTries bounds the appends of one batch.
const maxTries = 10

// maxBatch bounds the entries published before their acks are awaited.
const maxBatch = 512

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
	anchored uint64

	subs    []*nats.Subscription
	subsMu  sync.Mutex
	inboxes map[string]*nats.Subscription // by agent
	stop    context.CancelFunc
	done chan struct{}
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
	w := &Writer{nc: nc, js: js, stream: stream, kv: kv, cfg: cfg, log: log, in: make(chan queued, 1024), done: make(chan struct{}),
		inboxes: map[string]*nats.Subscription{},
		d: deriver{isAgent: cfg.IsAgent, ledger: map[string]ledgerState{}}}
	if w.keep, err = retention(stream.CachedInfo().Config); err != nil {
		return nil, err
	}
	if err := w.resync(ctx); err != nil {
		return nil, err
	}
	w.anchored = w.head.Seq
	for _, subj := range Subjects {
		sub, err := nc.Subscribe(subj, w.take)
		if err != nil {
			w.unsubscribe()
			return nil, fmt.Errorf("audit: subscribe %s: %w", subj, err)
		}
		_ = sub.SetPendingLimits(maxQueued, 64<<20)
		w.subs = append(w.subs, sub)
	}
	if cfg.Agents != nil {
		if err := w.SetAgents(cfg.Agents()); err != nil {
			w.unsubscribe()
			return nil, err
		}
	}
	run, stop := context.WithCancel(context.Background())
	w.stop = stop
	w.in <- queued{subject: ""} // the writer's own entry: it started
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
	case w.in <- queued{subject: m.Subject, header: m.Header, data: m.Data}:
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
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.subs = nil
	for id, s := range w.inboxes {
		_ = s.Unsubscribe()
		delete(w.inboxes, id)
	}
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
		sub, err := w.nc.Subscribe(protocol.InboxOf(id), w.take)
		if err != nil {
			errs = append(errs, fmt.Errorf("audit: subscribe %s: %w", protocol.InboxOf(id), err))
			continue
		}
		_ = sub.SetPendingLimits(maxQueued, 64<<20)
		w.inboxes[id] = sub
	}
	for id, sub := range w.inboxes {
		if !want[id] {
			_ = sub.Unsubscribe()
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
			w.drain()
			w.anchor(context.Background())
			return
		case q := <-w.in:
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
			out = append(out, protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditWriterStarted})
			return
		}
		if e, ok := w.d.derive(q.subject, q.header, q.data); ok {
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
		out = append(out, protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditWriterStarted, Outcome: fmt.Sprintf("%d messages missed", n)})
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
			if !sleep(ctx, time.Duration(min(try, 10))*200*time.Millisecond) {
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

// publish seals and publishes entries in order, waits for their acks, and
// returns how many were stored in order from the first.
func (w *Writer) publish(ctx context.Context, entries []protocol.AuditEntry) (int, error) {
	now := w.cfg.Now().UTC()
	head := w.head
	futures := make([]jetstream.PubAckFuture, 0, len(entries))
	sealed := make([]protocol.AuditAnchor, 0, len(entries))
	for i := range entries {
		e := entries[i]
		e.Seq, e.Prev, e.Time = head.Seq+1, head.Hash, now
		e.Hash = e.Sum()
		data, err := json.Marshal(e)
		if err != nil {
			return 0, err
		}
		f, err := w.js.PublishAsync(protocol.AuditSubject, data, jetstream.WithExpectLastSequence(head.Seq), jetstream.WithExpectStream(protocol.AuditStream))
		if err != nil {
			break
		}
		futures = append(futures, f)
		head = protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}
		sealed = append(sealed, head)
	}
	stored := 0
	var first error
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if first == nil && ack.Sequence == sealed[i].Seq {
				stored = i + 1
				w.head = sealed[i]
			}
		case err := <-f.Err():
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return stored, ctx.Err()
		}
	}
	if first == nil && stored < len(entries) {
		first = errors.New("not every entry was published")
	}
	return stored, first
}

// resync reads the head: the stream's last entry, or retention's
// checkpoint when the stream holds none.
func (w *Writer) resync(ctx context.Context) error {
	m, err := w.stream.GetLastMsgForSubject(ctx, protocol.AuditSubject)
	if err == nil {
		var e protocol.AuditEntry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return fmt.Errorf("audit: last entry (stream sequence %d) unreadable: %w", m.Sequence, err)
		}
		w.head = protocol.AuditAnchor{Seq: m.Sequence, Hash: e.Hash, Time: e.Time}
		return nil
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("audit: last entry: %w", err)
	}
	cp, err := readAnchor(ctx, w.kv, protocol.AuditCheckpointKey)
	if err != nil {
		return err
	}
	if cp != nil {
		w.head = *cp
	} else {
		w.head = protocol.AuditAnchor{}
	}
	return nil
}

// anchor writes the head into the anchors' bucket and the writer's log when
// it moved: two places apart from the stream.
func (w *Writer) anchor(ctx context.Context) {
	if w.head.Seq == w.anchored || w.head.Seq == 0 {
		return
	}
	data, _ := json.Marshal(w.head)
	if _, err := w.kv.Put(ctx, protocol.AuditHeadKey, data); err != nil {
		w.log.Warn("audit: head not anchored", "seq", w.head.Seq, "err", err)
		return
	}
	w.anchored = w.head.Seq
	w.log.Info("audit head anchored", "seq", w.head.Seq, "hash", w.head.Hash)
}

// retain removes the entries older than the retention, after writing the
// last of them as the checkpoint.
func (w *Writer) retain(ctx context.Context) {
	cut, err := w.lastBefore(ctx, w.cfg.Now().Add(-w.keep))
	if err != nil {
		w.log.Warn("audit: retention not applied", "err", err)
		return
	}
	if cut == nil {
		return
	}
	data, _ := json.Marshal(cut)
	if _, err := w.kv.Put(ctx, protocol.AuditCheckpointKey, data); err != nil {
		w.log.Warn("audit: checkpoint not written: nothing removed", "err", err)
		return
	}
	if err := w.stream.Purge(ctx, jetstream.WithPurgeSequence(cut.Seq+1)); err != nil {
		w.log.Warn("audit: entries past retention not removed", "through", cut.Seq, "err", err)
		return
	}
	w.log.Info("audit: entries past retention removed", "through", cut.Seq, "checkpoint", cut.Hash)
}

// lastBefore finds the last entry older than t (nil: none), by a binary
// search over the stream: entries are appended in time order.
func (w *Writer) lastBefore(ctx context.Context, t time.Time) (*protocol.AuditAnchor, error) {
	info, err := w.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	var found *protocol.AuditAnchor
	for lo <= hi {
		mid := lo + (hi-lo)/2
		e, seq, err := w.entryAtOrAfter(ctx, mid)
		if err != nil {
			return nil, err
		}
		if e == nil || !e.Time.Before(t) {
			if mid == 0 {
				break
			}
			hi = mid - 1
			continue
		}
		found = &protocol.AuditAnchor{Seq: seq, Hash: e.Hash, Time: e.Time}
		lo = seq + 1
	}
	return found, nil
}

// entryAtOrAfter reads the entry at seq, or the next one if seq is gone.
func (w *Writer) entryAtOrAfter(ctx context.Context, seq uint64) (*protocol.AuditEntry, uint64, error) {
	m, err := w.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(protocol.AuditSubject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var e protocol.AuditEntry
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return nil, 0, fmt.Errorf("entry at %d unreadable: %w", m.Sequence, err)
	}
	return &e, m.Sequence, nil
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

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
