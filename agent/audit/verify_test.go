package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// chain makes n sealed entries from seq from on, chained onto prev.
func chain(from uint64, n int, prev string) []protocol.AuditEntry {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var out []protocol.AuditEntry
	for i := 0; i < n; i++ {
		e := protocol.AuditEntry{Seq: from + uint64(i), Time: t0.Add(time.Duration(i) * time.Second), Who: "agent-1",
			Kind: protocol.AuditTaskResult, What: "t" + string(rune('a'+i%26)), Outcome: protocol.StatusOK, Prev: prev}
		e.Hash = e.Sum()
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func raw(t *testing.T, e protocol.AuditEntry) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func verify(t *testing.T, entries []protocol.AuditEntry, cp *protocol.AuditAnchor, anchors ...protocol.AuditAnchor) Report {
	t.Helper()
	v := NewVerifier(cp, anchors...)
	for _, e := range entries {
		v.Add(e.Seq, raw(t, e))
	}
	return v.Report()
}

func anchorOf(e protocol.AuditEntry) protocol.AuditAnchor {
	return protocol.AuditAnchor{Seq: e.Seq, Hash: e.Hash, Time: e.Time}
}

func wantProblem(t *testing.T, r Report, part string) {
	t.Helper()
	for _, p := range r.Problems {
		if strings.Contains(p, part) {
			return
		}
	}
	t.Fatalf("no problem saying %q; got %q", part, r.Problems)
}

func TestAWholeTrailVerifies(t *testing.T) {
	es := chain(1, 10, "")
	r := verify(t, es, nil, anchorOf(es[9]))
	if !r.OK() || r.Entries != 10 || r.First != 1 || r.Last != 10 {
		t.Fatalf("report %+v", r)
	}
}

func TestAnEditedEntryIsCaught(t *testing.T) {
	es := chain(1, 10, "")
	es[4].Outcome = protocol.StatusFailed // the hash no longer matches
	wantProblem(t, verify(t, es, nil), "entry 5: edited")

	// Edited and rehashed, with the rest of the chain rewritten onto it:
	// only the anchored head can tell.
	es = chain(1, 10, "")
	head := anchorOf(es[9])
	es[4].Outcome = protocol.StatusFailed
	es[4].Hash = es[4].Sum()
	rest := chain(6, 5, es[4].Hash)
	es = append(es[:5], rest...)
	r := verify(t, es, nil)
	if !r.OK() {
		t.Fatalf("a rewritten chain without an anchor looks whole, yet: %q", r.Problems)
	}
	wantProblem(t, verify(t, es, nil, head), "entry 10: differs from the head anchored")
}

func TestADeletedEntryIsCaught(t *testing.T) {
	es := chain(1, 10, "")
	wantProblem(t, verify(t, append(append([]protocol.AuditEntry{}, es[:3]...), es[4:]...), nil), "entries 4: deleted")
	// The first entries gone, with no checkpoint: deleted, not retention.
	wantProblem(t, verify(t, es[3:], nil), "entries 1 to 3: deleted (retention has removed nothing)")
}

func TestATruncatedTrailIsCaught(t *testing.T) {
	es := chain(1, 10, "")
	wantProblem(t, verify(t, es[:7], nil, anchorOf(es[9])), "entries 8 to 10: truncated")
	// Every entry gone past a checkpoint, the head anchored later.
	cp := anchorOf(es[2])
	wantProblem(t, verify(t, nil, &cp, anchorOf(es[9])), "entries 4 to 10: truncated")
}

func TestRetentionIsToldFromDeletion(t *testing.T) {
	es := chain(1, 10, "")
	cp := anchorOf(es[3]) // retention removed 1 to 4
	r := verify(t, es[4:], &cp, anchorOf(es[9]))
	if !r.OK() || r.First != 5 {
		t.Fatalf("retention's removal reported as %q (first %d)", r.Problems, r.First)
	}
	// One more gone than the checkpoint says.
	wantProblem(t, verify(t, es[5:], &cp), "entries 5: deleted (retention removed up to entry 4)")
	// A checkpoint written, the removal not done yet: still whole.
	if r := verify(t, es, &cp); !r.OK() {
		t.Fatalf("a checkpoint ahead of the removal: %q", r.Problems)
	}
	// A first entry that does not chain to the checkpoint.
	bad := chain(5, 3, "0000")
	wantProblem(t, verify(t, bad, &cp), "does not chain to retention's checkpoint")
}

func TestAnEntryWithAFieldAddedOrOutOfOrderIsCaught(t *testing.T) {
	es := chain(1, 4, "")
	v := NewVerifier(nil)
	v.Add(1, raw(t, es[0]))
	b := raw(t, es[1])
	v.Add(2, append(b[:len(b)-1], []byte(`,"note":"x"}`)...))
	v.Add(3, raw(t, es[3]))
	v.Add(3, raw(t, es[2]))
	r := v.Report()
	wantProblem(t, r, "an entry in message 2: unreadable")
	wantProblem(t, r, "entry 3 after entry 4: out of order")
}
