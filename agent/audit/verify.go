package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Report is what a verification found.
type Report struct {
	Entries     int
	First, Last uint64 // the first and last entry read (0: none)
	// Head is the last entry read: keep it, and verify against it later
	// (an anchor of one's own).
	Head *protocol.AuditAnchor `json:",omitempty"`
	// Checkpoint is the last entry retention removed (nil: none yet).
	Checkpoint *protocol.AuditAnchor
	// Anchors are the heads the chain was checked against.
	Anchors []protocol.AuditAnchor
	// Problems are what an edit, a deletion or a truncation left; empty
	// when the trail is intact.
	Problems []string
	// Gaps are what the trail says it does not hold (entries lost, over a
	// share or not written, the writer's bus link lost), the running count
	// of what was not recorded jumping (an entry saying so was itself
	// lost), and what the writer counted that no entry says yet; empty
	// when nothing went unrecorded that the trail can know of.
	Gaps []string
	// NotRecorded is how many entries the gaps are of (those whose number
	// is known), and OverShare how many of them went over a share, by the
	// share.
	NotRecorded int64
	OverShare   map[string]int64 `json:",omitempty"`
	// Starts is how often the writer started within the entries read:
	// what crossed the bus while it was down is not in the trail (a note,
	// not a gap: a deploy restarts it).
	Starts int
}

// OK reports whether the trail is whole: intact, and nothing went
// unrecorded that it can know of.
func (r Report) OK() bool { return len(r.Problems) == 0 && len(r.Gaps) == 0 }

// Intact reports whether no edit, deletion or truncation was found.
func (r Report) Intact() bool { return len(r.Problems) == 0 }

// Verifier checks entries one by one, in order: each hashes to itself,
// chains to the one before, follows without a gap, the first one follows
// retention's checkpoint (or is the first ever), and the anchored heads
// are there with the hashes anchored.
type Verifier struct {
	r       Report
	anchors map[uint64]string
	prev    *protocol.AuditEntry
	msg     uint64 // the stream sequence of the last message read

	// The running count of entries not recorded, as the last entry
	// carrying it said (entry totalAt).
	total     int64
	totalAt   uint64
	haveTotal bool
	bucket    *protocol.AuditUnrecorded
}

// NewVerifier starts a verification against a checkpoint (nil: retention
// removed nothing) and the heads anchored.
func NewVerifier(checkpoint *protocol.AuditAnchor, anchors ...protocol.AuditAnchor) *Verifier {
	v := &Verifier{r: Report{Checkpoint: checkpoint, Anchors: anchors}, anchors: map[uint64]string{}}
	for _, a := range anchors {
		v.anchors[a.Seq] = a.Hash
	}
	return v
}

func (v *Verifier) problem(format string, a ...any) {
	v.r.Problems = append(v.r.Problems, fmt.Sprintf(format, a...))
}

func (v *Verifier) gap(format string, a ...any) {
	v.r.Gaps = append(v.r.Gaps, fmt.Sprintf(format, a...))
}

// Unrecorded gives the count of entries not recorded that the anchors'
// bucket holds, read after the entries (the writer keeps it there before
// an entry says it): what it counts beyond the trail's last entry saying
// so is a gap too.
func (v *Verifier) Unrecorded(u *protocol.AuditUnrecorded) { v.bucket = u }

// Add checks the next entry. msg is the stream sequence of the message it
// was read from, to name where an unreadable one is.
func (v *Verifier) Add(msg uint64, raw []byte) {
	if msg != v.msg {
		if v.msg != 0 && msg > v.msg+1 {
			v.problem("messages %s of the stream: missing (deleted)", span(v.msg+1, msg-1))
		}
		v.msg = msg
	}
	var e protocol.AuditEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		v.problem("an entry in message %d: unreadable (%v): edited", msg, err)
		v.prev = nil
		return
	}
	v.r.Entries++
	if v.r.First == 0 {
		v.r.First = e.Seq
	}
	v.r.Last = e.Seq
	if e.Sum() != e.Hash {
		v.problem("entry %d: edited (its content does not hash to its hash)", e.Seq)
	}
	if h, ok := v.anchors[e.Seq]; ok && h != e.Hash {
		v.problem("entry %d: differs from the head anchored at it (edited, and the chain after it rewritten)", e.Seq)
	}
	if cp := v.r.Checkpoint; cp != nil && e.Seq == cp.Seq && e.Hash != cp.Hash {
		v.problem("entry %d: differs from retention's checkpoint at it", e.Seq)
	}
	switch prev := v.prev; {
	case prev == nil && v.r.Entries == 1:
		v.first(e)
	case prev == nil:
		// after an unreadable entry: nothing to chain to
	case e.Seq <= prev.Seq:
		v.problem("entry %d after entry %d: out of order", e.Seq, prev.Seq)
	case e.Seq != prev.Seq+1:
		v.problem("entries %s: deleted", span(prev.Seq+1, e.Seq-1))
	case e.Prev != prev.Hash:
		v.problem("entry %d: does not chain to entry %d (one of them was edited or replaced)", e.Seq, prev.Seq)
	}
	v.prev = &e
	v.r.Head = &protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}
	v.gaps(e)
}

// gaps notes what the writer's own entries say was not recorded, and
// checks the running count they carry.
func (v *Verifier) gaps(e protocol.AuditEntry) {
	at := fmt.Sprintf("entry %d (%s)", e.Seq, e.Time.UTC().Format(time.RFC3339))
	switch e.Kind {
	case protocol.AuditWriterStarted:
		v.r.Starts++
		v.carried(e, 0)
	case protocol.AuditMissed, protocol.AuditOverShare:
		switch {
		case e.What == protocol.AuditMissedLink:
			v.gap("%s: %s", at, e.Outcome)
			v.carried(e, 0)
			return
		case e.Count == 0 && e.Total == 0:
			// Written before entries carried their count: "N entries lost".
			var n int64
			_, _ = fmt.Sscanf(e.Outcome, "%d entries lost", &n)
			v.r.NotRecorded += n
			v.gap("%s: %s", at, e.Outcome)
			return
		}
		v.carried(e, e.Count)
		v.r.NotRecorded += e.Count
		if e.Kind == protocol.AuditOverShare {
			if v.r.OverShare == nil {
				v.r.OverShare = map[string]int64{}
			}
			v.r.OverShare[e.What] += e.Count
		}
		v.gap("%s: %s", at, e.Outcome)
	case protocol.AuditUnwritten:
		v.carried(e, e.Count)
		v.r.NotRecorded += e.Count
		v.gap("%s: an entry of %s (%s) not written: %s", at, e.Who, e.What, e.Outcome)
	}
}

// carried checks the running count e carries against the last one: it
// grows by e's own count, or an entry saying what was not recorded is
// missing.
func (v *Verifier) carried(e protocol.AuditEntry, count int64) {
	before := e.Total - count
	switch {
	case v.haveTotal && before > v.total:
		v.r.NotRecorded += before - v.total
		v.gap("entries %s: %s entries not recorded that no entry in the trail says (the count of what was not recorded jumps from %d to %d: an entry saying so was lost, or the writer stopped before writing it)",
			span(v.totalAt+1, e.Seq), thousands(before-v.total), v.total, before)
	case v.haveTotal && before < v.total:
		v.problem("entry %d: the count of entries not recorded goes back from %d to %d (the anchors' bucket was reset, or an entry replaced)", e.Seq, v.total, before)
	case !v.haveTotal && before > 0 && v.r.Checkpoint == nil && v.r.First == 1:
		v.r.NotRecorded += before
		v.gap("entries 1 to %d: %s entries not recorded before entry %d that no entry in the trail says", e.Seq, thousands(before), e.Seq)
	}
	v.total, v.totalAt, v.haveTotal = e.Total, e.Seq, true
}

// first checks where the trail starts: the first entry ever, or the one
// after retention's checkpoint.
func (v *Verifier) first(e protocol.AuditEntry) {
	cp := v.r.Checkpoint
	switch {
	case cp == nil && e.Seq == 1:
		if e.Prev != "" {
			v.problem("entry 1: names an entry before it, but it is the first")
		}
	case cp == nil:
		v.problem("entries %s: deleted (retention has removed nothing)", span(1, e.Seq-1))
	case e.Seq == cp.Seq+1:
		if e.Prev != cp.Hash {
			v.problem("entry %d: does not chain to retention's checkpoint (entry %d)", e.Seq, cp.Seq)
		}
	case e.Seq > cp.Seq+1:
		v.problem("entries %s: deleted (retention removed up to entry %d)", span(cp.Seq+1, e.Seq-1), cp.Seq)
	}
	// e.Seq <= cp.Seq: retention wrote its checkpoint and has not removed
	// up to it yet; the chain is checked from here.
}

// Report ends the verification: an anchored head past the last entry read
// means the trail was cut short.
func (v *Verifier) Report() Report {
	r := v.r
	r.Problems = append([]string(nil), r.Problems...)
	floor := uint64(0)
	if r.Checkpoint != nil {
		floor = r.Checkpoint.Seq
	}
	for _, a := range r.Anchors {
		switch {
		case a.Seq > r.Last && a.Seq > floor:
			from := max(r.Last, floor) + 1
			r.Problems = append(r.Problems, fmt.Sprintf("entries %s: truncated (the head was anchored at entry %d)", span(from, a.Seq), a.Seq))
		}
	}
	r.Gaps = append([]string(nil), r.Gaps...)
	if u := v.bucket; u != nil {
		switch {
		case v.haveTotal && u.Total > v.total:
			r.NotRecorded += u.Total - v.total
			r.Gaps = append(r.Gaps, fmt.Sprintf("%s entries not recorded since entry %d: the writer counted them (in %s, %s) and no entry says so yet",
				thousands(u.Total-v.total), v.totalAt, protocol.AuditAnchorsBucket, u.Time.UTC().Format(time.RFC3339)))
		case v.haveTotal && u.Total < v.total:
			r.Problems = append(r.Problems, fmt.Sprintf("%s counts %d entries not recorded, the trail %d: the bucket was reset", protocol.AuditAnchorsBucket, u.Total, v.total))
		case !v.haveTotal && u.Total > 0 && r.Checkpoint == nil:
			r.NotRecorded += u.Total
			r.Gaps = append(r.Gaps, fmt.Sprintf("%s entries not recorded: the writer counted them (in %s) and no entry says so", thousands(u.Total), protocol.AuditAnchorsBucket))
		}
	}
	return r
}

func span(a, b uint64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d to %d", a, b)
}
