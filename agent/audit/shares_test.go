package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Twice every share fits in seven eighths of the trail, whatever the
// flock's size: no sender, nor all of them together, can fill it; on the
// smallest trail flock:audit.maxMiB allows, a share of 500 agents holds
// entries.
func TestTheSharesFitTheTrail(t *testing.T) {
	for _, agents := range []int{0, 1, 2, 10, 500} {
		for _, trail := range []int64{1 << 20, 16 << 20, protocol.DefaultAuditBytes} {
			z := sizeShares(trail, 90*24*time.Hour, agents)
			n := int64(max(agents, 1))
			if sum := 2 * (n*z.of("agent-1") + n*z.of("services:agent-1") + z.of("operator")); sum > trail*7/8 {
				t.Errorf("%d agents, %d bytes: twice the shares are %d, over seven eighths of the trail", agents, trail, sum)
			}
			if trail >= 16<<20 && z.of("agent-1") < 4*protocol.MaxAuditEntry {
				t.Errorf("%d agents, %d bytes: an agent's share (%d) holds no entry", agents, trail, z.of("agent-1"))
			}
		}
	}
}

// A sender flooding spends its own share only: past it, its entries are
// refused while the operator's and another agent's are taken; its share
// fills again over the retention, and what it had left survives a
// restart of the writer.
func TestASenderOverItsShareTakesNoOnesElse(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	keep := 90 * 24 * time.Hour
	z := sizeShares(16<<20, keep, 10)
	s := newShares(z)
	const entry = 400
	taken, refused := 0, 0
	for i := range 7000 { // the audit flood: 7,000 results in a minute
		now := t0.Add(time.Duration(i) * time.Minute / 7000)
		if s.take("agent-1", entry, now) {
			taken++
		} else {
			refused++
		}
		if i%1000 == 0 && (!s.take("operator", entry, now) || !s.take("agent-2", entry, now) || !s.take("services:agent-1", entry, now)) {
			t.Fatalf("after %d of agent-1's entries, the operator's, agent-2's or the services' for agent-1 was refused", i)
		}
	}
	if want := int(z.agent / entry); taken < want || taken > want+1 || refused != 7000-taken {
		t.Fatalf("agent-1 took %d entries of %d bytes (%d refused) from a share of %d bytes", taken, entry, refused, z.agent)
	}
	t.Logf("agent-1: %d entries taken, %d refused (share %d bytes per %s)", taken, refused, z.agent, keep)

	// A tenth of the retention later, a tenth of the share is back.
	later := t0.Add(keep / 10)
	back := 0
	for s.take("agent-1", entry, later) {
		back++
	}
	if want := int(z.agent / 10 / entry); back < want-1 || back > want+1 {
		t.Errorf("a tenth of the retention later agent-1 took %d entries, want about %d", back, want)
	}
	// Carried over to a writer started anew: agent-1 still has nothing
	// left, agent-2 its whole share but what it spent.
	st := s.state(later)
	if _, ok := st.Left["agent-1"]; !ok {
		t.Fatalf("the state does not carry agent-1's spent share: %+v", st)
	}
	r := newShares(z)
	r.restore(st, later)
	if r.take("agent-1", entry, later) {
		t.Errorf("after a restart agent-1 had its share back")
	}
	if !r.take("agent-2", int(z.agent), later) || r.take("agent-2", entry, later) {
		t.Errorf("after a restart agent-2 had other than its whole share (it spent 7 entries, back long since)")
	}
	if got := z.overShareOutcome("agent-1", 6812); got != fmt.Sprintf("agent-1: 6,812 entries not recorded: over its share of %s bytes per 2160h0m0s", thousands(z.agent)) {
		t.Errorf("over-share outcome %q", got)
	}
}

// The queue is bounded in bytes, a sender to its part of its lane, and
// the operator's and the services' entries go first.
func TestTheQueueIsBoundedAndFair(t *testing.T) {
	q := newQueue(3<<20, 10) // 1 MiB own, 2 MiB agents': 204 KiB each
	it := func(sender string) queued {
		return queued{e: protocol.AuditEntry{Who: sender}, sender: sender, size: 1 << 10}
	}
	n := 0
	for q.push(it("agent-1")) {
		n++
	}
	if n != (2<<20)/10/(1<<10) {
		t.Fatalf("agent-1 queued %d KiB of a 2 MiB lane split 10 ways", n)
	}
	if !q.push(it("agent-2")) || !q.push(it("operator")) || !q.push(it("services:agent-1")) {
		t.Fatal("agent-1's full part kept another sender out")
	}
	for q.push(it("operator")) {
	}
	own := 0
	for _, p := range q.pop(1 << 20) {
		if p.sender == "agent-1" || p.sender == "agent-2" {
			break
		}
		own++
	}
	if want := (1 << 20) / (1 << 10); own != want {
		t.Errorf("%d of the own lane's entries before the agents', want its whole 1 MiB (%d)", own, want)
	}
	if q.len() != 0 || !q.push(it("agent-1")) {
		t.Errorf("%d left after popping all; agent-1 not let in again", q.len())
	}
}
