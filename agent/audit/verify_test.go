package audit

import (
	"encoding/json"
	"fmt"
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

// chainOf seals es in order from entry 1 on.
func chainOf(es ...protocol.AuditEntry) []protocol.AuditEntry {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	prev := ""
	for i := range es {
		es[i].Seq, es[i].Prev, es[i].Time = uint64(i+1), prev, t0.Add(time.Duration(i)*time.Second)
		es[i].Hash = es[i].Sum()
		prev = es[i].Hash
	}
	return es
}

func result(id string) protocol.AuditEntry {
	return protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditTaskResult, What: id, Outcome: protocol.StatusOK}
}

func started(total int64) protocol.AuditEntry {
	return protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditWriterStarted, Total: total}
}

func missed(cause string, count, total int64) protocol.AuditEntry {
	return protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditMissed, What: cause, Count: count, Total: total, Outcome: fmt.Sprintf("%d entries lost", count)}
}

// Each kind of gap the trail can know of makes verify say so, with how
// many entries it is of, and never "whole"; an intact trail with none is
// whole.
func TestVerifyReportsEveryGap(t *testing.T) {
	over := protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditOverShare, What: "agent-1", Agent: "agent-1", Count: 6812, Total: 6812,
		Outcome: "agent-1: 6,812 entries not recorded: over its share of 367,001 bytes per 2160h0m0s"}
	unwritten := protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditUnwritten, Agent: "agent-1", What: protocol.AuditTaskResult, Count: 1, Total: 1, Outcome: "the trail refused it"}
	link := protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditMissed, What: protocol.AuditMissedLink, Outcome: "the writer's bus connection was lost: what crossed the bus meanwhile is not known"}
	for _, c := range []struct {
		name       string
		es         []protocol.AuditEntry
		bucket     *protocol.AuditUnrecorded
		want       string
		unrecorded int64
	}{
		{"entries lost", chainOf(started(0), result("a"), missed(protocol.AuditMissedQueue, 3, 3), result("b")), nil, "entry 3 (2026-11-27T12:00:02Z): 3 entries lost", 3},
		{"over a share", chainOf(started(0), over, result("b")), nil, "over its share", 6812},
		{"not written", chainOf(started(0), unwritten), nil, "an entry of agent-1 (task.result) not written: the trail refused it", 1},
		{"the link lost", chainOf(started(0), link, result("a")), nil, "what crossed the bus meanwhile is not known", 0},
		{"a record of lost entries lost itself", chainOf(started(0), missed(protocol.AuditMissedQueue, 3, 3), result("a"), missed(protocol.AuditMissedQueue, 2, 9)), nil,
			"entries 3 to 4: 4 entries not recorded that no entry in the trail says", 9},
		{"lost before the writer restarted", chainOf(started(0), missed(protocol.AuditMissedQueue, 3, 3), started(7), result("a")), nil,
			"entries 3: 4 entries not recorded that no entry in the trail says", 7},
		{"counted, not said yet", chainOf(started(5), result("a")), &protocol.AuditUnrecorded{Total: 12},
			"7 entries not recorded since entry 1", 12},
		{"counted before the trail began", chainOf(started(5), result("a")), nil, "entries 1 to 1: 5 entries not recorded before entry 1", 5},
		{"written before counts", chainOf(started(0), protocol.AuditEntry{Who: protocol.ServicesUser, Kind: protocol.AuditMissed, Outcome: "40 entries lost"}), nil, "40 entries lost", 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := NewVerifier(nil)
			for _, e := range c.es {
				v.Add(e.Seq, raw(t, e))
			}
			v.Unrecorded(c.bucket)
			r := v.Report()
			if r.OK() || !r.Intact() || r.NotRecorded != c.unrecorded || !strings.Contains(strings.Join(r.Gaps, "\n"), c.want) {
				t.Fatalf("ok %v intact %v, %d not recorded (want %d), gaps %q; want one saying %q", r.OK(), r.Intact(), r.NotRecorded, c.unrecorded, r.Gaps, c.want)
			}
		})
	}
	// Whole: nothing counted since the trail began.
	r := verify(t, chainOf(started(0), result("a"), started(0), result("b")), nil)
	if !r.OK() || r.Starts != 2 {
		t.Fatalf("a trail with nothing unrecorded since it began: %+v", r)
	}
	// The count going back: the bucket was reset, or an entry replaced.
	v := NewVerifier(nil)
	for _, e := range chainOf(started(0), missed(protocol.AuditMissedQueue, 3, 3), started(1)) {
		v.Add(e.Seq, raw(t, e))
	}
	v.Unrecorded(&protocol.AuditUnrecorded{Total: 0})
	r = v.Report()
	wantProblem(t, r, "entry 3: the count of entries not recorded goes back from 3 to 1")
	wantProblem(t, r, "counts 0 entries not recorded, the trail 1: the bucket was reset")
	// A message of the stream missing between two read.
	es := chain(1, 4, "")
	v = NewVerifier(nil)
	for i, e := range es {
		v.Add(uint64(i+1)+uint64(i/2)*3, raw(t, e)) // messages 1, 2, 6, 7
	}
	wantProblem(t, v.Report(), "messages 3 to 5 of the stream: missing (deleted)")
}
