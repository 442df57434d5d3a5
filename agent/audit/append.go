package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// A message of the trail holds one or more entries, as JSON lines, in
// order; the chain runs across messages.

// chunkOf is one message to publish: its lines, how many entries they
// are, and the last entry in it.
type chunkOf struct {
	data  []byte
	n     int
	final protocol.AuditAnchor
}

// lostEntry is an entry append could not write, and why (a cause of
// protocol.AuditMissed*).
type lostEntry struct {
	at    int // its index in what append was given
	e     protocol.AuditEntry
	cause string
}

// append writes entries onto the head, in order, and returns those it
// could not write. Each message is published expecting the one before it
// as the stream's last (a second writer cannot fork the chain), pipelined.
// No entry's failure takes others with it: when a message fails, those
// before it are kept, and the rest are sealed again onto the head and
// retried (the messages after a failed one were refused only because the
// stream's last was not what they expected); a message the stream refuses
// as too large is split and its entries tried alone, and an entry refused
// alone is the only one lost. A failure that may pass (a timeout, the bus
// away, another writer's append) is retried, up to maxTries, after reading
// the head again: a head that is one of the messages sent says those up to
// it were stored (an acknowledgement lost). A full trail refuses
// everything: the rest is lost at once.
func (w *Writer) append(ctx context.Context, entries []protocol.AuditEntry) []lostEntry {
	var lost []lostEntry
	todo := entries
	lose := func(es []protocol.AuditEntry, cause string) {
		for i, e := range es {
			lost = append(lost, lostEntry{len(entries) - len(todo) + i, e, cause})
		}
	}
	single := 0 // the next entries to publish one per message
	for try := 0; len(todo) > 0; {
		chunks := w.seal(todo, single)
		n, err := w.publish(ctx, chunks)
		done := 0
		for _, c := range chunks[:n] {
			done += c.n
		}
		todo, single = todo[done:], max(0, single-done)
		if err == nil || len(todo) == 0 {
			continue
		}
		switch apiCode(err) {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			if chunks[n].n > 1 {
				single = chunks[n].n
				continue
			}
			w.log.Error("audit: an entry the trail refuses as too large", "kind", todo[0].Kind, "who", todo[0].Who, "bytes", len(chunks[n].data), "err", err)
			lose(todo[:1], tooLarge)
			todo, single = todo[1:], max(0, single-1)
			continue
		case errStoreFailed:
			w.log.Error("audit: the trail refuses entries (full?)", "entries", len(todo), "err", err)
			lose(todo, protocol.AuditMissedRefused)
			return lost
		}
		try++
		if try >= maxTries || ctx.Err() != nil {
			w.log.Error("audit: entries not appended", "entries", len(todo), "tries", try, "err", err)
			lose(todo, protocol.AuditMissedFailed)
			return lost
		}
		w.log.Warn("audit: entries not appended yet", "left", len(todo), "err", err)
		if !pace.Sleep(ctx, time.Duration(min(try, 10))*200*time.Millisecond) {
			lose(todo, protocol.AuditMissedFailed)
			return lost
		}
		if err := w.resync(ctx); err != nil {
			w.log.Warn("audit: head not read", "err", err)
			continue
		}
		for j := len(chunks) - 1; j >= n; j-- {
			if w.head.Seq == chunks[j].final.Seq && w.head.Hash == chunks[j].final.Hash {
				for _, c := range chunks[n : j+1] {
					todo, single = todo[c.n:], max(0, single-c.n)
				}
				break
			}
		}
	}
	return lost
}

// tooLarge is why append lost an entry the stream refused alone, as over
// its message limit: the entry becomes an audit.unwritten one.
const tooLarge = "too large"

// errStoreFailed is JetStream's "storing failed": a stream that refuses
// new messages (DiscardNew: the trail is full).
const errStoreFailed jetstream.ErrorCode = 10077

func apiCode(err error) jetstream.ErrorCode {
	var a *jetstream.APIError
	if errors.As(err, &a) {
		return a.ErrorCode
	}
	return 0
}

// seal seals entries onto the head into messages of at most w.chunk bytes,
// the first single entries one per message.
func (w *Writer) seal(entries []protocol.AuditEntry, single int) []chunkOf {
	now := w.cfg.Now().UTC()
	head := w.head
	var chunks []chunkOf
	var cur chunkOf
	for i := range entries {
		e := entries[i]
		e.Seq, e.Prev = head.Seq+1, head.Hash
		if e.Time.IsZero() {
			e.Time = now
		}
		line := e.Seal()
		if cur.n > 0 && (i <= single || len(cur.data)+1+len(line) > w.chunk) {
			chunks = append(chunks, cur)
			cur = chunkOf{}
		}
		if cur.n > 0 {
			cur.data = append(cur.data, '\n')
		}
		cur.data = append(cur.data, line...)
		cur.n++
		head = protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}
		cur.final = head
	}
	if cur.n > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// publish publishes chunks, each expecting the one before it as the
// stream's last, waits (up to batchWait) for the acknowledgements, and
// returns how many were stored, in order from the first, moving the head
// past them.
func (w *Writer) publish(ctx context.Context, chunks []chunkOf) (int, error) {
	wait, cancel := context.WithTimeout(ctx, batchWait)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, 0, len(chunks))
	var first error
	for i, c := range chunks {
		f, err := w.js.PublishAsync(protocol.AuditSubject, c.data, jetstream.WithExpectLastSequence(w.last+uint64(i)), jetstream.WithExpectStream(protocol.AuditStream))
		if err != nil {
			first = err
			break
		}
		futures = append(futures, f)
	}
	stored := 0
	base := w.last
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Sequence == base+uint64(i)+1 && stored == i {
				stored++
				w.head, w.last = chunks[i].final, ack.Sequence
			}
		case err := <-f.Err():
			return stored, err
		case <-wait.Done():
			return stored, wait.Err()
		}
	}
	if first == nil && stored < len(chunks) {
		first = errors.New("not every message was published")
	}
	return stored, first
}

// resync reads the head: the last entry of the stream's last message, or
// retention's checkpoint when the stream holds none.
func (w *Writer) resync(ctx context.Context) error {
	m, err := w.stream.GetLastMsgForSubject(ctx, protocol.AuditSubject)
	if err == nil {
		e, err := lastEntry(m.Data)
		if err != nil {
			return fmt.Errorf("audit: last message (stream sequence %d): %w", m.Sequence, err)
		}
		w.head, w.last = protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}, m.Sequence
		return nil
	}
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("audit: last entry: %w", err)
	}
	info, err := w.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("audit: stream %s: %w", protocol.AuditStream, err)
	}
	w.last = info.State.LastSeq // a purge keeps the stream's sequence
	cp, err := readAnchor(ctx, w.kv, protocol.AuditCheckpointKey)
	if err != nil {
		return err
	}
	w.head = protocol.AuditAnchor{}
	if cp != nil {
		w.head = *cp
	}
	return nil
}

// lines splits a message of the trail into its entries' lines.
func lines(data []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

func lastEntry(data []byte) (protocol.AuditEntry, error) {
	var e protocol.AuditEntry
	ls := lines(data)
	if len(ls) == 0 {
		return e, errors.New("no entry")
	}
	if err := json.Unmarshal(ls[len(ls)-1], &e); err != nil {
		return e, fmt.Errorf("last entry unreadable: %w", err)
	}
	return e, nil
}

// retain removes the messages whose every entry is older than the
// retention, after writing the last of those entries as the checkpoint.
func (w *Writer) retain(ctx context.Context) {
	cut, msg, err := w.lastBefore(ctx, w.cfg.Now().Add(-w.keep))
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
	if err := w.stream.Purge(ctx, jetstream.WithPurgeSequence(msg+1)); err != nil {
		w.log.Warn("audit: entries past retention not removed", "through", cut.Seq, "err", err)
		return
	}
	w.log.Info("audit: entries past retention removed", "through", cut.Seq, "checkpoint", cut.Hash)
}

// lastBefore finds the last message whose last entry is older than t, by a
// binary search over the stream (entries are appended in time order): the
// anchor of that entry and the message's sequence (nil: none).
func (w *Writer) lastBefore(ctx context.Context, t time.Time) (*protocol.AuditAnchor, uint64, error) {
	info, err := w.stream.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil, 0, err
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq
	var found *protocol.AuditAnchor
	var at uint64
	for lo <= hi {
		mid := lo + (hi-lo)/2
		e, seq, err := w.lastEntryAtOrAfter(ctx, mid)
		if err != nil {
			return nil, 0, err
		}
		if e == nil || !e.Time.Before(t) {
			if mid == 0 {
				break
			}
			hi = mid - 1
			continue
		}
		found, at = &protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}, seq
		lo = seq + 1
	}
	return found, at, nil
}

// lastEntryAtOrAfter reads the last entry of the message at seq, or of the
// next one if seq is gone.
func (w *Writer) lastEntryAtOrAfter(ctx context.Context, seq uint64) (*protocol.AuditEntry, uint64, error) {
	m, err := w.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(protocol.AuditSubject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	e, err := lastEntry(m.Data)
	if err != nil {
		return nil, 0, fmt.Errorf("message %d: %w", m.Sequence, err)
	}
	return &e, m.Sequence, nil
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

// busBack reports whether the bus answers the writer (a PING), waiting up
// to d for its connection to come back.
func (w *Writer) busBack(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !w.nc.IsConnected() {
		if w.nc.IsClosed() || time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return w.nc.FlushTimeout(max(time.Until(deadline), 100*time.Millisecond)) == nil
}
