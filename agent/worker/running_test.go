package worker_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A task's start is in a heartbeat soon after, whatever the interval (the
// dashboard shows what each agent runs), with the task's span when it runs
// in a trace (the gateway ties an untraced call to it), and its end in a
// heartbeat soon after too.
func TestHeartbeatsListTheRunningTasks(t *testing.T) {
	e := newEnv(t, bustest.Agents(1))
	hbs := e.subscribeHeartbeats("agent-1")
	e.start("agent-1", func(c *worker.Config) { c.Heartbeat = time.Hour })

	caller := protocol.NewTrace()
	mark := filepath.Join(e.shared, "sleeper-started")
	b, _ := json.Marshal(tool("sleeper", "sleep", "2s", "--mark", mark))
	m := nats.NewMsg(protocol.TaskSubject("agent-1"))
	m.Data = b
	m.Header.Set(protocol.HeaderTraceparent, caller.String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitFile(t, mark, 10*time.Second)
	started := time.Now()
	deadline := time.After(2 * time.Second)
	for seen := false; !seen; {
		select {
		case hb := <-hbs:
			if len(hb.Tasks) == 1 && hb.Tasks[0].ID == "sleeper" && hb.Tasks[0].Kind == "exec" && !hb.Tasks[0].Since.IsZero() {
				tp, err := protocol.ParseTraceparent(hb.Tasks[0].Traceparent)
				if err != nil || tp.Trace() != caller.Trace() || tp.SpanID == caller.SpanID {
					t.Fatalf("the running task's traceparent %q: want a span of its own in trace %s", hb.Tasks[0].Traceparent, caller.Trace())
				}
				t.Logf("the start was in a heartbeat %s after the task's mark", time.Since(started).Round(time.Millisecond))
				seen = true
			}
		case <-deadline:
			t.Fatal("no heartbeat listed the running task within 2 s (the interval is an hour)")
		}
	}
	deadline = time.After(6 * time.Second)
	for {
		select {
		case hb := <-hbs:
			if len(hb.Tasks) == 0 {
				t.Logf("the end was in a heartbeat %s after the task's mark (it sleeps 2 s)", time.Since(started).Round(time.Millisecond))
				return
			}
		case <-deadline:
			t.Fatal("no heartbeat said the task had ended within 6 s of its start (it sleeps 2 s; the interval is an hour)")
		}
	}
}
