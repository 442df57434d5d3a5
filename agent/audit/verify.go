package audit

import (
	"bytes"
	"encoding/json"
	"fmt"

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
	// when the trail is whole.
	Problems []string
}

// OK reports whether the trail is whole.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Verifier checks entries one by one, in order: each hashes to itself,
// chains to the one before, follows without a gap, the first one follows
// retention's checkpoint (or is the first ever), and the anchored heads
// are there with the hashes anchored.
type Verifier struct {
	r       Report
	anchors map[uint64]string
	prev    *protocol.AuditEntry
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

// Add checks the next entry. msg is the stream sequence of the message it
// was read from, to name where an unreadable one is.
func (v *Verifier) Add(msg uint64, raw []byte) {
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
	return r
}

func span(a, b uint64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d to %d", a, b)
}
