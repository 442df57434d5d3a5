package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// trail is what the trail holds, tallied.
type trail struct {
	lines     int
	longest   int
	by        map[string]int // entries by who and kind ("agent-1 task.result")
	what      map[string]bool
	counted   map[string]int64 // the writer's own entries' counts, by kind and agent ("audit.overshare agent-1")
	kept      []string         // entries keeping a body's '<'
	unwritten []protocol.AuditEntry
	links     int
}

func tally(t *testing.T, js jetstream.JetStream) trail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr := trail{by: map[string]int{}, what: map[string]bool{}, counted: map[string]int64{}}
	err := audit.Each(ctx, js, audit.Filter{}, func(_ uint64, raw []byte, e protocol.AuditEntry) error {
		tr.lines++
		tr.longest = max(tr.longest, len(raw))
		tr.by[e.Who+" "+e.Kind]++
		tr.what[e.What] = true
		tr.counted[e.Kind+" "+e.Agent] += e.Count
		if strings.Contains(string(raw), `\u003c`) {
			tr.kept = append(tr.kept, e.Kind)
		}
		if e.Kind == protocol.AuditUnwritten {
			tr.unwritten = append(tr.unwritten, e)
		}
		if e.What == protocol.AuditMissedLink {
			tr.links++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// notRecorded is every count the writer's own entries carry.
func (tr trail) notRecorded() int64 {
	var n int64
	for _, c := range tr.counted {
		n += c
	}
	return n
}

// resultWithID is a result whose task ID is id, as an agent may publish it.
func resultWithID(id string) []byte {
	return []byte(`{"v":1,"task_id":"` + id + `","status":"ok"}`)
}

// The audit flood, on a trail of 1 MiB: agent-1 publishes 3,000 results
// with task IDs of 11,000 '<' (JSON writes each as six bytes: 66 KB an
// entry, were the ID kept) and 300 messages with such IDs, as fast as it
// can, while the operator sends ten tasks. Every entry is under the bound
// and keeps no ID of agent-1's; agent-1 is recorded up to its share and
// the rest counted as over it; the operator's ten are all there; verify
// says what went unrecorded, with the count.
func TestAFloodKeepsToItsShareAndTheOperatorsEntriesLand(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2), bustest.WithAudit(audit.Config{TrailBytes: 1 << 20, SummaryEvery: 200 * time.Millisecond}))
	op := f.Connect(t, protocol.OperatorUser)
	a1 := f.Connect(t, "agent-1")
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := strings.Repeat("<", 11000)
	result := resultWithID(id)
	message := []byte(`{"v":1,"id":"` + id + `","body":"x"}`)
	const results = 3000
	sent := 0
	for i := range results {
		if err := a1.Publish(protocol.ResultSubject("agent-1"), result); err != nil {
			t.Fatal(err)
		}
		sent++
		if i%10 == 0 {
			if err := a1.Publish(protocol.InboxSubject("agent-2", "agent-1"), message); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if i%300 == 0 {
			task, _ := json.Marshal(protocol.Task{V: 1, ID: fmt.Sprint("op-", i), Kind: "echo"})
			if _, err := js.Publish(ctx, protocol.TaskSubject("agent-2"), task); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a1.Flush(); err != nil {
		t.Fatal(err)
	}
	var tr trail
	testkit.WaitFor(t, 20*time.Second, "every one of agent-1's results and messages recorded or counted", func() bool {
		tr = tally(t, js)
		own := tr.by["agent-1 task.result"] + tr.by["agent-1 message"]
		return own+int(tr.counted["audit.overshare agent-1"]+tr.counted["audit.missed agent-1"]+tr.counted["audit.missed "]) >= sent
	})
	own := tr.by["agent-1 task.result"] + tr.by["agent-1 message"]
	over := tr.counted["audit.overshare agent-1"]
	t.Logf("agent-1 sent %d: %d recorded, %d over its share, %d missed; %d entries in all, the longest %d bytes", sent, own, over,
		tr.counted["audit.missed agent-1"]+tr.counted["audit.missed "], tr.lines, tr.longest)
	if own+int(tr.counted["audit.overshare agent-1"]+tr.counted["audit.missed agent-1"]) > sent {
		t.Errorf("more recorded and counted (%d + %d) than agent-1 sent (%d)", own, tr.notRecorded(), sent)
	}
	if over == 0 || own == 0 || own > (1<<20)*7/16/2/2/250 {
		t.Errorf("agent-1: %d recorded, %d over its share: want its share's worth recorded, the rest over", own, over)
	}
	if tr.longest > protocol.MaxAuditEntry || len(tr.kept) > 0 {
		t.Errorf("the longest entry is %d bytes (bound %d); %d keep agent-1's IDs", tr.longest, protocol.MaxAuditEntry, len(tr.kept))
	}
	for i := 0; i < results; i += 300 {
		if !tr.what[fmt.Sprint("op-", i)] {
			t.Errorf("the operator's task op-%d is not in the trail", i)
		}
	}
	r := verify(t, js)
	if r.OK() || !r.Intact() || r.OverShare["agent-1"] != over || r.NotRecorded != tr.notRecorded() {
		t.Fatalf("verify after the flood: ok %v, intact %v, over share %v (the trail says %d), %d not recorded (the trail says %d); problems %q",
			r.OK(), r.Intact(), r.OverShare, over, r.NotRecorded, tr.notRecorded(), r.Problems)
	}
	t.Logf("verify: %q", r.Gaps)
}

// An entry the trail refuses (here: over the stream's message limit,
// lowered under it) becomes an audit.unwritten entry of its own, saying
// whose and why; the entries before and after it in the same batch (the
// same message, and the messages expecting it as the stream's last) are
// all written.
func TestAnEntryThatCannotBeWrittenTakesNoOtherWithIt(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2), bustest.WithAudit(audit.Config{Linger: 200 * time.Millisecond}))
	op := f.Connect(t, protocol.OperatorUser)
	a1 := f.Connect(t, "agent-1")
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testkit.WaitFor(t, 10*time.Second, "the writer's start", func() bool { return tally(t, js).by["services audit.started"] == 1 })

	big := "T" + strings.Repeat("t", 127) // the longest task ID, and a trace: the longest result entry
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	size, err := audit.LineSize(protocol.AuditEntry{Time: time.Now().UTC(), Who: "agent-1", Kind: protocol.AuditTaskResult, What: big, Outcome: protocol.StatusOK, Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	// The stream counts a message's headers too (the expected last
	// sequence and stream: 83 bytes and the sequence's digits); LineSize
	// counts a sequence of 19 digits and a newline, this trail's messages
	// 1 or 2 digits and none. So the big entry alone is over this, and the
	// others (an unwritten entry too) are not.
	cfg.MaxMsgSize = int32(size + 83 - 18 - 16)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2", big, "s3", "s4"} {
		r := []byte(`{"v":1,"task_id":"` + id + `","status":"ok","trace":"` + trace + `"}`)
		if err := a1.Publish(protocol.ResultSubject("agent-1"), r); err != nil {
			t.Fatal(err)
		}
	}
	_ = a1.Flush()
	var tr trail
	testkit.WaitFor(t, 15*time.Second, "s1 to s4 and an entry saying the big one was not written", func() bool {
		tr = tally(t, js)
		return tr.what["s1"] && tr.what["s2"] && tr.what["s3"] && tr.what["s4"] && len(tr.unwritten) == 1
	})
	if u := tr.unwritten[0]; tr.what[big] || u.Who != "agent-1" || u.What != protocol.AuditTaskResult || !strings.Contains(u.Outcome, "over its message limit") || u.Count != 1 {
		t.Fatalf("the big entry written %v; the unwritten entry %+v", tr.what[big], u)
	}
	r := verify(t, js)
	if r.OK() || !r.Intact() || r.NotRecorded != 1 || !strings.Contains(strings.Join(r.Gaps, "\n"), "an entry of agent-1 (task.result) not written") {
		t.Fatalf("verify: %+v", r)
	}
}

// Counts of what was not recorded are a running total since the trail
// began: they go on across the writer's restart, and when the entries
// saying them are lost too (the trail full) the anchors' bucket keeps the
// total, verify reports what it counts beyond the trail, and the next
// writer's start carries it into the trail: every result agent-1 sent is
// an entry or counted.
func TestMissedCountsSurviveARestartAndTheLossOfTheirOwnEntry(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2), bustest.WithAudit(audit.Config{QueueBytes: 48 << 10, AnchorEvery: 100 * time.Millisecond}))
	op := f.Connect(t, protocol.OperatorUser)
	a1 := f.Connect(t, "agent-1")
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent := 0
	burst := func(n int) {
		t.Helper()
		for i := range n {
			if err := a1.Publish(protocol.ResultSubject("agent-1"), resultWithID(fmt.Sprint("r-", sent+i))); err != nil {
				t.Fatal(err)
			}
		}
		sent += n
		if err := a1.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	accounted := func(tr trail, r audit.Report) int { return tr.by["agent-1 task.result"] + int(r.NotRecorded) }

	// A burst faster than the writer: its queue has room for a few.
	burst(5000)
	var r audit.Report
	testkit.WaitFor(t, 15*time.Second, "the burst recorded or counted", func() bool {
		r = verify(t, js)
		return accounted(tally(t, js), r) == sent && len(r.Gaps) > 0
	})
	first := r.NotRecorded
	if first == 0 || !r.Intact() {
		t.Fatalf("after a burst of 5,000 into a 48 KiB queue: %+v", r)
	}

	// The trail full: the entries, and those saying how many were lost,
	// are refused; the bucket keeps the count.
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, roomy := info.Config, info.Config
	full.MaxBytes = int64(info.State.Bytes)
	if _, err := js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	burst(2000)
	testkit.WaitFor(t, 15*time.Second, "verify to count the refused ones from the bucket", func() bool {
		r = verify(t, js)
		return accounted(tally(t, js), r) == sent
	})
	if !strings.Contains(strings.Join(r.Gaps, "\n"), "the writer counted them") {
		t.Fatalf("the refused entries' count is not reported from the bucket: %q", r.Gaps)
	}
	// The writer stops with the trail still full (its last entries are
	// lost too) and starts again once there is room.
	f.StopServices()
	if _, err := js.UpdateStream(ctx, roomy); err != nil {
		t.Fatal(err)
	}
	f.StartServices(t)
	burst(3000)
	var tr trail
	testkit.WaitFor(t, 15*time.Second, "the new writer to carry the count into the trail", func() bool {
		r = verify(t, js)
		tr = tally(t, js)
		return accounted(tr, r) == sent && tr.by["services audit.started"] == 2 && !strings.Contains(strings.Join(r.Gaps, "\n"), "the writer counted them")
	})
	if !r.Intact() || r.NotRecorded <= first || !strings.Contains(strings.Join(r.Gaps, "\n"), "that no entry in the trail says") {
		t.Fatalf("after the restart: %+v", r)
	}
	t.Logf("agent-1 sent %d: %d recorded, %d not recorded (%d before the trail was full); gaps %q", sent, tr.by["agent-1 task.result"], r.NotRecorded, first, r.Gaps)
}

// Messages the bus client drops over a subscription's pending limits (a
// slow consumer) are counted as missed, not only logged; the writer's bus
// link lost and back is said too.
func TestClientDropsAndALostLinkAreRecorded(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2), bustest.WithoutAudit())
	op := f.Connect(t, protocol.OperatorUser)
	a1 := f.Connect(t, "agent-1")
	svc := f.Connect(t, protocol.ServicesUser, nats.ReconnectWait(100*time.Millisecond), nats.MaxReconnects(-1))
	js := bustest.JetStream(t, op)
	var subs []*nats.Subscription
	slow := func(subject string, h nats.MsgHandler) (func(), func() int, error) {
		sub, err := svc.Subscribe(subject, func(m *nats.Msg) {
			if m.Subject == protocol.ResultSubject("agent-1") {
				time.Sleep(time.Millisecond) // a listener slower than the flood
			}
			h(m)
		})
		if err != nil {
			return nil, nil, err
		}
		_ = sub.SetPendingLimits(16, 1<<20)
		subs = append(subs, sub)
		return func() { _ = sub.Unsubscribe() }, func() int { n, _ := sub.Dropped(); return n }, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := audit.Start(ctx, svc, bustest.JetStream(t, svc), audit.Config{Subscribe: slow, Agents: func() []string { return []string{"agent-1", "agent-2"} }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	_ = svc.Flush()
	const n = 2000
	for i := range n {
		if err := a1.Publish(protocol.ResultSubject("agent-1"), resultWithID(fmt.Sprint("r-", i))); err != nil {
			t.Fatal(err)
		}
	}
	_ = a1.Flush()
	var tr trail
	testkit.WaitFor(t, 20*time.Second, "every result recorded or counted as dropped", func() bool {
		tr = tally(t, js)
		return tr.by["agent-1 task.result"]+int(tr.counted["audit.missed "]) == n
	})
	dropped := 0
	for _, s := range subs {
		d, _ := s.Dropped()
		dropped += d
	}
	if dropped == 0 || int(tr.counted["audit.missed "]) != dropped {
		t.Fatalf("the client dropped %d; the trail counts %d as dropped", dropped, tr.counted["audit.missed "])
	}

	// The bus goes away and comes back: what crossed meanwhile is not known.
	f.Bus.Shutdown()
	f.RestartBus(t)
	testkit.WaitFor(t, 20*time.Second, "an entry saying the writer's link was lost", func() bool { return tally(t, js).links == 1 })
	if r := verify(t, js); r.OK() || !strings.Contains(strings.Join(r.Gaps, "\n"), "what crossed the bus meanwhile is not known") {
		t.Fatalf("verify after the link was lost: %+v", r)
	}
	t.Logf("%d of %d dropped by the client, counted", dropped, n)
}
