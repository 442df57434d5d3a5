package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// entries reads the whole trail as the operator.
func entries(t *testing.T, js jetstream.JetStream, f audit.Filter) []protocol.AuditEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []protocol.AuditEntry
	if err := audit.Each(ctx, js, f, func(_ uint64, _ []byte, e protocol.AuditEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func has(es []protocol.AuditEntry, who, kind, agent, what, outcome string) bool {
	for _, e := range es {
		if e.Who == who && e.Kind == kind && e.Agent == agent && e.What == what && e.Outcome == outcome {
			return true
		}
	}
	return false
}

func verify(t *testing.T, js jetstream.JetStream, given ...protocol.AuditAnchor) audit.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := audit.Verify(ctx, js, given...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// What crosses the bus becomes the trail: who comes from the subject the
// bus let them publish on, not from a body; the trail verifies whole; and
// an entry the operator deletes through the JetStream API is caught.
func TestTheTrailRecordsWhatCrossesTheBus(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2), bustest.WithAudit(audit.Config{AnchorEvery: 50 * time.Millisecond}))
	op := f.Connect(t, protocol.OperatorUser)
	a1 := f.Connect(t, "agent-1")
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	task, _ := json.Marshal(protocol.Task{V: 1, ID: "t-1", Kind: "echo", Stdin: "a secret the trail never keeps"})
	if _, err := js.Publish(ctx, protocol.TaskSubject("agent-1"), task); err != nil {
		t.Fatal(err)
	}
	// agent-1 answers, claiming in the body to be agent-2: the subject wins.
	res, _ := json.Marshal(protocol.Result{V: 1, TaskID: "t-1", Agent: "agent-2", Status: protocol.StatusOK, Stdout: "a secret"})
	if err := a1.Publish(protocol.ResultSubject("agent-1"), res); err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(protocol.Message{V: 1, ID: "m-1", From: "operator", Body: "hello"})
	if err := a1.Publish(protocol.InboxSubject("agent-2", "agent-1"), msg); err != nil {
		t.Fatal(err)
	}
	// A result on the subject of an agent the flock does not have: the bus
	// refuses agent-1 that subject, and the trail would not take it.
	_ = a1.Publish(protocol.ResultSubject("agent-9"), res)
	_ = a1.Flush()

	var es []protocol.AuditEntry
	testkit.WaitFor(t, 10*time.Second, "the trail to hold the task, its result and the message", func() bool {
		es = entries(t, js, audit.Filter{})
		return has(es, protocol.OperatorUser, protocol.AuditTaskSent, "agent-1", "t-1", "") &&
			has(es, "agent-1", protocol.AuditTaskResult, "", "t-1", protocol.StatusOK) &&
			has(es, "agent-1", protocol.AuditMessage, "agent-2", "m-1", "")
	})
	if es[0].Kind != protocol.AuditWriterStarted || es[0].Seq != 1 || es[0].Prev != "" {
		t.Fatalf("the first entry is %+v, want the writer's start, first of the chain", es[0])
	}
	for _, e := range es {
		line, _ := json.Marshal(e)
		if strings.Contains(string(line), "secret") || strings.Contains(string(line), "hello") {
			t.Fatalf("an entry keeps a body: %s", line)
		}
		if e.Who == "agent-2" || e.Agent == "agent-9" {
			t.Fatalf("an entry took who from a body or a foreign subject: %+v", e)
		}
	}
	if got := entries(t, js, audit.Filter{Agent: "agent-2"}); len(got) != 1 || got[0].Kind != protocol.AuditMessage {
		t.Fatalf("filter by agent-2: %+v", got)
	}
	if got := entries(t, js, audit.Filter{Kind: protocol.AuditTaskResult}); len(got) != 1 {
		t.Fatalf("filter by kind: %+v", got)
	}
	if got := entries(t, js, audit.Filter{Since: time.Now().Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("filter since an hour ahead: %+v", got)
	}

	testkit.WaitFor(t, 5*time.Second, "the head to be anchored", func() bool {
		r := verify(t, js)
		return r.OK() && len(r.Anchors) == 1 && r.Anchors[0].Seq == r.Last
	})
	// Neither an agent nor the operator may write an entry.
	for _, nc := range []interface{ Publish(string, []byte) error }{a1, op} {
		forged, _ := json.Marshal(protocol.AuditEntry{Seq: 99, Who: "operator", Kind: protocol.AuditTaskSent})
		_ = nc.Publish(protocol.AuditSubject, forged)
	}
	_ = op.Flush()
	_ = a1.Flush()
	time.Sleep(200 * time.Millisecond)
	if r := verify(t, js); !r.OK() {
		t.Fatalf("a forged entry got in: %q", r.Problems)
	}

	// The operator (who holds the JetStream API) deletes the second entry.
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, stream.CachedInfo().State.FirstSeq); err != nil {
		t.Fatal(err)
	}
	// (Deleted, or cut off when that message held every entry.)
	r := verify(t, js)
	if r.OK() || !regexp.MustCompile(`entries 1( to \d+)?: (deleted \(retention has removed nothing\)|truncated)`).MatchString(strings.Join(r.Problems, "\n")) {
		t.Fatalf("a deleted entry went unseen: %+v", r)
	}
}

// Retention removes old entries after leaving a checkpoint, and the trail
// still verifies whole; a deletion beyond the checkpoint, or the newest
// entries cut off, does not.
func TestRetentionLeavesACheckpoint(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64 // how far ahead the writer's clock runs
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	f := bustest.Start(t, bustest.Agents(1), bustest.WithAudit(audit.Config{Now: now, AnchorEvery: 50 * time.Millisecond, RetainEvery: 50 * time.Millisecond}))
	op := f.Connect(t, protocol.OperatorUser)
	js := bustest.JetStream(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	send := func(id string) {
		t.Helper()
		task, _ := json.Marshal(protocol.Task{V: 1, ID: id, Kind: "echo"})
		if _, err := js.Publish(ctx, protocol.TaskSubject("agent-1"), task); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		send(fmt.Sprintf("old-%d", i))
	}
	testkit.WaitFor(t, 10*time.Second, "five old entries", func() bool { return len(entries(t, js, audit.Filter{Kind: protocol.AuditTaskSent})) == 5 })
	// The writer's clock jumps past the retention: the next entries are
	// new, the old ones go.
	skew.Store(int64(protocol.DefaultAuditRetention + time.Hour))
	// Three new entries, in two messages at least (the writer gathers
	// what comes within its linger into one).
	send("new-0")
	testkit.WaitFor(t, 10*time.Second, "the first new entry", func() bool {
		got := entries(t, js, audit.Filter{Kind: protocol.AuditTaskSent})
		return len(got) > 0 && got[len(got)-1].What == "new-0"
	})
	send("new-1")
	send("new-2")
	var r audit.Report
	testkit.WaitFor(t, 10*time.Second, "retention to remove the old entries, leaving a checkpoint", func() bool {
		r = verify(t, js)
		return r.Checkpoint != nil && r.First == r.Checkpoint.Seq+1 && r.Entries == 3
	})
	if !r.OK() {
		t.Fatalf("after retention: %q", r.Problems)
	}
	if got := entries(t, js, audit.Filter{}); got[0].What != "new-0" {
		t.Fatalf("first entry left: %+v", got[0])
	}
	testkit.WaitFor(t, 5*time.Second, "the head anchored at the last entry", func() bool {
		r = verify(t, js)
		return len(r.Anchors) > 0 && r.Anchors[len(r.Anchors)-1].Seq == r.Last
	})

	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first message after the checkpoint (new-0's) gone: a deletion,
	// not retention.
	if err := stream.DeleteMsg(ctx, info.State.FirstSeq); err != nil {
		t.Fatal(err)
	}
	deleted := regexp.MustCompile(fmt.Sprintf(`entries %d( to \d+)?: deleted \(retention removed up to entry %d\)`, r.First, r.Checkpoint.Seq))
	if got := verify(t, js); !deleted.MatchString(strings.Join(got.Problems, "\n")) {
		t.Fatalf("a deletion past the checkpoint: %q", got.Problems)
	}
	// The newest message cut off too: the anchored head says so.
	if err := stream.DeleteMsg(ctx, info.State.LastSeq); err != nil {
		t.Fatal(err)
	}
	if got := verify(t, js); !strings.Contains(strings.Join(got.Problems, "\n"), fmt.Sprintf("%d: truncated", r.Last)) {
		t.Fatalf("a truncated trail went unseen: %+v", got)
	}
}
