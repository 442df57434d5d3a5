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
	// Subscribe listens to a subject (nil: a subscription of the writer's
	// own): stop ends it, dropped says how many messages the bus client
	// dropped on it so far (over its pending limits: a slow consumer),
	// which the writer counts as missed.
	Subscribe func(subject string, h nats.MsgHandler) (stop func(), dropped func() int, err error)
	// AnchorEvery and RetainEvery pace the anchoring of the head and the
	// removal of what retention let go (0: protocol.AuditAnchorEvery, a
	// minute); SummaryEvery the entries saying what went over a share
	// (0: AnchorEvery).
	AnchorEvery, RetainEvery, SummaryEvery time.Duration
	// Linger is how long the writer lets entries gather before it
	// appends them (0: DefaultLinger; below 0: none).
	Linger time.Duration
	// QueueBytes bounds the writer's queue (0: DefaultQueueBytes).
	QueueBytes int
	// TrailBytes is what the shares are sized from (0: the stream's
	// MaxBytes, or protocol.DefaultAuditBytes when it has none).
	TrailBytes int64
	Now        func() time.Time
	Logger     *slog.Logger
}

// DefaultLinger is how long entries gather before they are appended.
const DefaultLinger = 50 * time.Millisecond

// maxTries bounds the appends of one batch that fail for a reason that
// may pass (a timeout, the bus away, another writer's append).
const maxTries = 10

// maxBatch bounds the entries sealed at once.
const maxBatch = 1024

// maxChunk bounds one message of the stream: the entries of a batch go in
// as few messages as fit (JSON lines), so that the trail costs the bus a
// store write per batch, not per entry.
const maxChunk = 60 << 10

// batchWait bounds the wait for one batch's acknowledgements (the
// services' link to the bus may be slow).
const batchWait = 30 * time.Second

// listener is one subscription of the writer's.
type listener struct {
	subject string
	stop    func()
	dropped func() int
	seen    int // dropped, as last counted
}

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
	trail  int64 // the bytes the shares are sized from

	q      *queue
	shares *shares
	t      *tally

	head     protocol.AuditAnchor // the last entry appended
	last     uint64               // the stream sequence of the message holding it
	chunk    int                  // the most bytes of entries one message holds
	anchored uint64

	subsMu     sync.Mutex
	subs       map[string]*listener // by subject
	inboxes    map[string][]string  // agent: its inbox subjects (protocol.InboxesOf)
	reconnects uint64
	down       time.Time // when the link was seen down (zero: up)
	lastMissed time.Time // when the writer's own entries were last written

	stop context.CancelFunc
	done chan struct{}
}

// Start finds the trail's head (the last entry, or retention's checkpoint
// when it removed them all) and what the writer before it left (the count
// of what was not recorded, the shares), subscribes to what it derives
// entries from, appends an entry saying it started, and writes until Stop.
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
	if cfg.SummaryEvery <= 0 {
		cfg.SummaryEvery = cfg.AnchorEvery
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
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
	sc := stream.CachedInfo().Config
	w := &Writer{nc: nc, js: js, stream: stream, kv: kv, cfg: cfg, log: log, done: make(chan struct{}),
		subs: map[string]*listener{}, inboxes: map[string][]string{}, trail: cfg.TrailBytes,
		d: deriver{isAgent: cfg.IsAgent, ledger: map[string]ledgerState{}}}
	if w.keep, err = retention(sc); err != nil {
		return nil, err
	}
	if w.trail <= 0 {
		w.trail = sc.MaxBytes
	}
	if w.trail <= 0 {
		w.trail = protocol.DefaultAuditBytes
	}
	w.chunk = int(min(int64(maxChunk), nc.MaxPayload()-2<<10))
	if sc.MaxMsgSize > 0 {
		w.chunk = min(w.chunk, int(sc.MaxMsgSize)-1<<10)
	}
	w.chunk = max(w.chunk, protocol.MaxAuditEntry)
	if err := w.resync(ctx); err != nil {
		return nil, err
	}
	w.anchored = w.head.Seq
	var agents []string
	if cfg.Agents != nil {
		agents = cfg.Agents()
	}
	w.q = newQueue(cfg.QueueBytes, len(agents))
	w.shares = newShares(sizeShares(w.trail, w.keep, len(agents)))
	if err := w.carryOver(ctx); err != nil {
		return nil, err
	}
	w.reconnects = nc.Stats().Reconnects
	for _, subj := range Subjects {
		if err := w.listen(subj); err != nil {
			w.unsubscribe()
			return nil, err
		}
	}
	if cfg.Agents != nil {
		if err := w.SetAgents(agents); err != nil {
			w.unsubscribe()
			return nil, err
		}
	}
	run, stop := context.WithCancel(context.Background())
	w.stop = stop
	go w.loop(run)
	return w, nil
}

// carryOver reads what the writer before left in the anchors' bucket: the
// count of entries not recorded (the trail's own running total goes on
// from it) and what each sender had left of its share.
func (w *Writer) carryOver(ctx context.Context) error {
	var u protocol.AuditUnrecorded
	if ok, err := readKey(ctx, w.kv, protocol.AuditUnrecordedKey, &u); err != nil {
		return err
	} else if !ok {
		u.Total = 0
	}
	w.t = newTally(u.Total)
	var st protocol.AuditShares
	ok, err := readKey(ctx, w.kv, protocol.AuditSharesKey, &st)
	if err != nil {
		w.log.Warn("audit: the shares the writer before left are unreadable: every sender starts with its whole share", "err", err)
		return nil
	}
	if ok {
		w.shares.restore(st, w.cfg.Now())
	}
	return nil
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

// take derives a message's entry and queues it, charged to its sender's
// share; it never blocks the connection, and keeps nothing of the body.
// An entry its sender has no share left for is counted over its share; one
// the queue has no room for, missed.
func (w *Writer) take(m *nats.Msg) {
	e, sender, ok := w.d.derive(m.Subject, m.Header, m.Data)
	if !ok {
		return
	}
	now := w.cfg.Now()
	e.Time = now.UTC()
	size, err := lineSize(e)
	if err != nil || size > protocol.MaxAuditEntry {
		w.t.unwrittenEntry(e, fmt.Sprintf("its line would be %d bytes, over the trail's bound of %d", size, protocol.MaxAuditEntry))
		return
	}
	if !w.shares.take(sender, size, now) {
		w.t.add(lossKey{kind: protocol.AuditOverShare, what: sender}, 1)
		return
	}
	if !w.q.push(queued{e: e, sender: sender, size: size}) {
		w.shares.refund(sender, size)
		w.t.missed(protocol.AuditMissedQueue, shareAgent(sender), 1)
	}
}

// lineSize is the most bytes e's line takes once sealed: its JSON with the
// largest sequence and the two hashes, and its newline.
func lineSize(e protocol.AuditEntry) (int, error) {
	e.Seq, e.Prev, e.Hash = 1<<63, "", ""
	b, err := json.Marshal(e)
	return len(b) + 2*64 + 1, err
}

// Stop stops listening, appends what was queued and says what was not
// recorded, and returns.
func (w *Writer) Stop() {
	w.unsubscribe()
	w.stop()
	<-w.done
}

func (w *Writer) unsubscribe() {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	for subj, l := range w.subs {
		l.stop()
		delete(w.subs, subj)
	}
	clear(w.inboxes)
}

// listen has take listen to subject.
func (w *Writer) listen(subject string) error {
	stop, dropped, err := w.subscribe(subject)
	if err != nil {
		return err
	}
	w.subsMu.Lock()
	w.subs[subject] = &listener{subject: subject, stop: stop, dropped: dropped}
	w.subsMu.Unlock()
	return nil
}

func (w *Writer) subscribe(subject string) (func(), func() int, error) {
	if w.cfg.Subscribe != nil {
		stop, dropped, err := w.cfg.Subscribe(subject, w.take)
		if err != nil {
			return nil, nil, fmt.Errorf("audit: %w", err)
		}
		return stop, dropped, nil
	}
	sub, err := w.nc.Subscribe(subject, w.take)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: subscribe %s: %w", subject, err)
	}
	_ = sub.SetPendingLimits(1<<14, 4<<20)
	return func() { _ = sub.Unsubscribe() }, func() int { n, _ := sub.Dropped(); return n }, nil
}

// SetAgents listens to the inboxes of ids, and of no other agent, and
// sizes the shares and the queue for them.
func (w *Writer) SetAgents(ids []string) error {
	w.shares.resize(sizeShares(w.trail, w.keep, len(ids)))
	w.q.setAgents(len(ids))
	want := map[string]bool{}
	var errs []error
	for _, id := range ids {
		want[id] = true
		w.subsMu.Lock()
		_, have := w.inboxes[id]
		w.subsMu.Unlock()
		if have {
			continue
		}
		var subjs []string
		for _, subj := range protocol.InboxesOf(id) {
			if err := w.listen(subj); err != nil {
				errs = append(errs, err)
				continue
			}
			subjs = append(subjs, subj)
		}
		if len(subjs) < len(protocol.InboxesOf(id)) {
			for _, subj := range subjs { // all or none, so the next call tries again
				w.unlisten(subj)
			}
			continue
		}
		w.subsMu.Lock()
		w.inboxes[id] = subjs
		w.subsMu.Unlock()
	}
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	for id, subjs := range w.inboxes {
		if !want[id] {
			for _, subj := range subjs {
				w.unlistenLocked(subj)
			}
			delete(w.inboxes, id)
		}
	}
	return errors.Join(errs...)
}

// unlisten stops listening to subject, counting what it dropped before.
func (w *Writer) unlisten(subject string) {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	w.unlistenLocked(subject)
}

func (w *Writer) unlistenLocked(subject string) {
	if l := w.subs[subject]; l != nil {
		w.countDropped(l) // what it dropped before it goes
		l.stop()
		delete(w.subs, subject)
	}
}
