package audit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// The writer's loop: batches of what is queued, appended with the
// writer's own entries saying what was not recorded, the head anchored,
// retention applied.

func (w *Writer) loop(run context.Context) {
	defer close(w.done)
	anchor := time.NewTicker(w.cfg.AnchorEvery)
	defer anchor.Stop()
	retain := time.NewTicker(w.cfg.RetainEvery)
	defer retain.Stop()
	summary := time.NewTicker(w.cfg.SummaryEvery)
	defer summary.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	w.retain(run)
	w.write(run, false) // the writer's start
	for {
		select {
		case <-run.Done():
			w.finish()
			return
		case <-w.q.ready:
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
			w.write(run, false)
		case <-second.C:
			w.watchLink()
			w.dropped()
			if w.t.due(false) {
				w.write(run, false)
			}
			w.persistTotal(run)
		case <-summary.C:
			if w.t.due(true) {
				w.write(run, true)
			}
		case <-anchor.C:
			w.anchor(run)
			w.persistShares(run)
		case <-retain.C:
			w.retain(run)
		}
	}
}

// finish appends what is queued and says what was not recorded when the
// writer stops, keeps the counts and the shares, and anchors the head.
func (w *Writer) finish() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !w.busBack(time.Second) {
		// Nothing queued can be written: stopping now, not after the
		// store's timeouts (a destroy stops bus and services together).
		w.log.Warn("audit: stopping with the bus away: what was queued is not written", "queued", w.q.len(), "head", w.head.Seq)
		return
	}
	w.dropped()
	for w.q.len() > 0 && ctx.Err() == nil {
		w.write(ctx, false)
	}
	if w.t.due(true) {
		w.write(ctx, true)
	}
	w.persistTotal(ctx)
	w.persistShares(ctx)
	w.anchor(ctx)
}

// write appends a batch: what is queued (up to maxBatch entries), in the
// order the messages crossed, and the writer's own entries saying what
// was not recorded (missed ones at most once a second; over-share ones
// with summaries). What could not be appended is counted as missed, and
// the counts the writer's own entries carried wait for the next ones.
func (w *Writer) write(ctx context.Context, summaries bool) {
	now := w.cfg.Now()
	taken := w.q.pop(maxBatch)
	entries := make([]protocol.AuditEntry, 0, len(taken)+4)
	for _, it := range taken {
		entries = append(entries, it.e)
	}
	slices.SortStableFunc(entries, func(a, b protocol.AuditEntry) int { return a.Time.Compare(b.Time) })
	var own []protocol.AuditEntry
	if summaries || now.Sub(w.lastMissed) >= time.Second {
		own = w.t.records(now, w.shares.size(), summaries)
	}
	if len(own) > 0 && !w.persistTotal(ctx) {
		// The bucket is ahead of the trail, or the entries wait: the
		// count an entry says is there first, in case the entry is lost.
		w.t.back(own)
		own = nil
	}
	if len(own) > 0 {
		w.lastMissed = now
		for _, e := range own {
			if e.Kind != protocol.AuditWriterStarted {
				w.log.Warn("audit: entries not recorded", "kind", e.Kind, "what", e.What, "agent", e.Agent, "count", e.Count, "total", e.Total)
			}
		}
	}
	entries = append(entries, own...)
	ownAt := make([]int, len(own)) // where each of own sits in entries
	for i := range own {
		ownAt[i] = len(entries) - len(own) + i
	}
	if len(own) > 0 && own[0].Kind == protocol.AuditWriterStarted && len(entries) > len(own) {
		// The writer's start opens its part of the chain, before anything
		// it derived in the same batch.
		start := own[0]
		copy(entries[1:ownAt[0]+1], entries[:ownAt[0]])
		entries[0], ownAt[0] = start, 0
	}
	if len(entries) == 0 {
		return
	}
	isOwn := map[int]bool{}
	for _, at := range ownAt {
		isOwn[at] = true
	}
	lost := w.append(ctx, entries)
	gone := map[int]bool{}
	var mine []protocol.AuditEntry
	n := 0
	for _, l := range lost {
		gone[l.at] = true
		if isOwn[l.at] {
			if l.cause == tooLarge {
				// A trail whose messages cannot hold the writer's own
				// entries: their counts stay in the anchors' bucket's
				// total, which verify reports beyond the trail.
				w.log.Error("audit: the trail refuses the writer's own entries as too large", "kind", l.e.Kind, "count", l.e.Count)
				continue
			}
			mine = append(mine, l.e) // the writer's own: their counts wait for the next
			continue
		}
		n++
		if l.cause == tooLarge {
			size, _ := lineSize(l.e)
			w.t.unwrittenEntry(l.e, fmt.Sprintf("the trail refused it: over its message limit (%d bytes)", size))
			continue
		}
		w.t.missed(l.cause, agentOf(l.e), 1)
	}
	for i, e := range own {
		if !gone[ownAt[i]] {
			w.t.stored(e.Total)
		}
	}
	w.t.back(mine)
	if len(lost) > 0 {
		w.log.Error("audit: entries lost: the trail did not take them", "entries", n, "own", len(mine))
	}
}

// agentOf is whose an entry is, for a count of lost ones.
func agentOf(e protocol.AuditEntry) string {
	if protocol.ValidAgentID(e.Who) && e.Who != protocol.GatewayUser && e.Who != "bus" {
		return e.Who
	}
	return e.Agent
}
