package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// What the trail does not record is counted, and said by entries of the
// writer's own: audit.missed (lost: the writer's queue was full, the
// client dropped messages, the trail refused or appending failed),
// audit.overshare (a sender over its share) and audit.unwritten (an entry
// that could not be written). Each carries its count and the running
// total since the trail began (protocol.AuditEntry's Count and Total).
// A count stays pending until the entry saying it is stored: an entry that
// is lost leaves its count to the next one. The total is kept in the
// anchors' bucket too (protocol.AuditUnrecordedKey), ahead of the trail,
// so that it survives the writer and an entry saying it that was lost.

// lossKey is what one pending count is of.
type lossKey struct {
	kind    string // protocol.AuditMissed or protocol.AuditOverShare
	what    string // the cause, or the share's sender
	agent   string // whose entries, when known
	subject string // where the bus client dropped them
}

// maxUnwritten bounds the audit.unwritten entries waiting: past it, an
// entry that cannot be written is counted as missed.
const maxUnwritten = 64

type tally struct {
	mu        sync.Mutex
	total     int64 // not recorded since the trail began
	recorded  int64 // the total the last entry stored says
	persisted int64 // the total the anchors' bucket holds
	pending   map[lossKey]int64
	unwritten []protocol.AuditEntry // audit.unwritten entries, Count and Total to come
	links     []protocol.AuditEntry // bus links lost, to say
	started   bool                  // the writer's start, to say
}

func newTally(total int64) *tally {
	return &tally{total: total, recorded: total, persisted: total, pending: map[lossKey]int64{}, started: true}
}

// add counts n entries not recorded.
func (t *tally) add(k lossKey, n int64) {
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += n
	t.pending[k] += n
}

// missed counts n entries lost for a cause.
func (t *tally) missed(cause, agent string, n int64) {
	t.add(lossKey{kind: protocol.AuditMissed, what: cause, agent: agent}, n)
}

// unwrittenEntry notes an entry that cannot be written.
func (t *tally) unwrittenEntry(e protocol.AuditEntry, why string) {
	t.mu.Lock()
	if len(t.unwritten) >= maxUnwritten {
		t.mu.Unlock()
		t.missed(protocol.AuditMissedFailed, e.Agent, 1)
		return
	}
	t.total++
	t.unwritten = append(t.unwritten, protocol.AuditEntry{Who: e.Who, Kind: protocol.AuditUnwritten, Agent: e.Agent, What: e.Kind, Outcome: why, Count: 1})
	t.mu.Unlock()
}

// linkLost notes that the writer's bus connection went down.
func (t *tally) linkLost(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.links = append(t.links, protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditMissed, What: protocol.AuditMissedLink,
		Outcome: what + ": what crossed the bus meanwhile is not known"})
}

// due reports whether any count (or, with summaries, an over-share count)
// waits for an entry.
func (t *tally) due(summaries bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started || len(t.unwritten) > 0 || len(t.links) > 0 {
		return true
	}
	for k := range t.pending {
		if summaries || k.kind != protocol.AuditOverShare {
			return true
		}
	}
	return false
}

// records takes the entries saying what waits (over-share counts only
// with summaries, as they pile up under a flood), each with its count
// and the running total, in order from the last one stored. Until
// stored or given back (back) they are out of the pending counts.
func (t *tally) records(now time.Time, z shareSizes, summaries bool) []protocol.AuditEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	now = now.UTC()
	var out []protocol.AuditEntry
	total := t.recorded
	if t.started {
		t.started = false
		out = append(out, protocol.AuditEntry{Time: now, Who: protocol.ServicesUser, Kind: protocol.AuditWriterStarted, Total: total})
	}
	for _, e := range t.links {
		e.Time, e.Total = now, total
		out = append(out, e)
	}
	t.links = nil
	for _, e := range t.unwritten {
		total += e.Count
		e.Time, e.Total = now, total
		out = append(out, e)
	}
	t.unwritten = nil
	keys := make([]lossKey, 0, len(t.pending))
	for k := range t.pending {
		if summaries || k.kind != protocol.AuditOverShare {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b lossKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.what, b.what), cmp.Compare(a.agent, b.agent), cmp.Compare(a.subject, b.subject))
	})
	for _, k := range keys {
		n := t.pending[k]
		delete(t.pending, k)
		total += n
		e := protocol.AuditEntry{Time: now, Who: protocol.ServicesUser, Kind: k.kind, Agent: k.agent, Count: n, Total: total}
		switch k.kind {
		case protocol.AuditOverShare:
			e.What, e.Agent, e.Outcome = shareName(k.what), shareAgent(k.what), z.overShareOutcome(k.what, n)
		default:
			e.What, e.Outcome = k.what, missedOutcome(k, n)
		}
		out = append(out, e)
	}
	return out
}

func missedOutcome(k lossKey, n int64) string {
	whose := ""
	if k.agent != "" {
		whose = " of " + k.agent + "'s"
	}
	switch k.what {
	case protocol.AuditMissedQueue:
		return fmt.Sprintf("%s entries%s lost: the writer's queue had no room for them", thousands(n), whose)
	case protocol.AuditMissedDropped:
		on := ""
		if k.subject != "" {
			on = " on " + k.subject
		}
		return fmt.Sprintf("%s messages lost%s before the writer read them: the bus client dropped them (a slow consumer)", thousands(n), on)
	case protocol.AuditMissedRefused:
		return fmt.Sprintf("%s entries%s lost: the trail refused them", thousands(n), whose)
	}
	return fmt.Sprintf("%s entries%s lost: not written", thousands(n), whose)
}

// stored says that the writer's entries up to one with total were
// stored.
func (t *tally) stored(total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recorded = max(t.recorded, total)
}

// back gives the counts of writer's entries that were not stored back to
// the pending ones (the next entries say them).
func (t *tally) back(es []protocol.AuditEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range es {
		switch e.Kind {
		case protocol.AuditWriterStarted:
			t.started = true
		case protocol.AuditUnwritten:
			e.Total = 0
			t.unwritten = append(t.unwritten, e)
		case protocol.AuditMissed, protocol.AuditOverShare:
			if e.What == protocol.AuditMissedLink {
				t.links = append(t.links, e)
				continue
			}
			k := lossKey{kind: e.Kind, what: e.What, agent: e.Agent}
			if e.Kind == protocol.AuditOverShare {
				k = lossKey{kind: e.Kind, what: senderOfShare(e.What)}
			}
			t.pending[k] += e.Count
		}
	}
}

// senderOfShare is the sender whose share name is name (shareName).
func senderOfShare(name string) string {
	if id, ok := strings.CutPrefix(name, "the services for "); ok {
		return forAgent(id)
	}
	return name
}

// unpersisted is the total when the anchors' bucket holds less.
func (t *tally) unpersisted() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total, t.total != t.persisted
}

func (t *tally) persistedAt(total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.persisted = max(t.persisted, total)
}

// watchLink notes the writer's bus connection going down and coming back:
// what crossed the bus meanwhile is not known.
func (w *Writer) watchLink() {
	now := w.cfg.Now()
	if !w.nc.IsConnected() {
		if w.down.IsZero() {
			w.down = now
		}
		return
	}
	r := w.nc.Stats().Reconnects
	if r == w.reconnects {
		return
	}
	w.reconnects = r
	what := "the writer's bus connection was lost and came back before " + now.UTC().Format(time.RFC3339)
	if !w.down.IsZero() {
		what = fmt.Sprintf("the writer's bus connection was lost from %s to %s", w.down.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	w.down = time.Time{}
	w.t.linkLost(what)
}

// dropped counts what the bus client dropped on the writer's subscriptions
// since the last look.
func (w *Writer) dropped() {
	w.subsMu.Lock()
	defer w.subsMu.Unlock()
	for _, l := range w.subs {
		w.countDropped(l)
	}
}

func (w *Writer) countDropped(l *listener) {
	if l.dropped == nil {
		return
	}
	n := l.dropped()
	if n < l.seen { // a subscription made anew counts from 0
		l.seen = 0
	}
	if n > l.seen {
		w.t.add(lossKey{kind: protocol.AuditMissed, what: protocol.AuditMissedDropped, subject: l.subject}, int64(n-l.seen))
	}
	l.seen = n
}

// persistTotal writes the running count of entries not recorded to the
// anchors' bucket when it moved, and reports whether the bucket holds it.
func (w *Writer) persistTotal(ctx context.Context) bool {
	total, moved := w.t.unpersisted()
	if !moved {
		return true
	}
	data, _ := json.Marshal(protocol.AuditUnrecorded{Total: total, Time: w.cfg.Now().UTC()})
	if _, err := w.kv.Put(ctx, protocol.AuditUnrecordedKey, data); err != nil {
		w.log.Warn("audit: the count of entries not recorded not kept", "total", total, "err", err)
		return false
	}
	w.t.persistedAt(total)
	return true
}

// persistShares writes what each sender has left of its share.
func (w *Writer) persistShares(ctx context.Context) {
	data, _ := json.Marshal(w.shares.state(w.cfg.Now()))
	if _, err := w.kv.Put(ctx, protocol.AuditSharesKey, data); err != nil {
		w.log.Warn("audit: the shares not kept", "bytes", len(data), "err", err)
	}
}
