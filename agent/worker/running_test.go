package worker_test

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A task's start is in a heartbeat soon after, whatever the interval (the
// dashboard shows what each agent runs), and its end in the next one.
func TestHeartbeatsListTheRunningTasks(t *testing.T) {
	e := newEnv(t, bustest.Agents(1))
	hbs := e.subscribeHeartbeats("agent-1")
	e.start("agent-1", func(c *worker.Config) { c.Heartbeat = time.Hour })

	e.publishSleeping("sleeper", "3s", "sleeper-started")
	started := time.Now()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case hb := <-hbs:
			if len(hb.Tasks) == 1 && hb.Tasks[0].ID == "sleeper" && hb.Tasks[0].Kind == "exec" && !hb.Tasks[0].Since.IsZero() {
				t.Logf("the start was in a heartbeat %s after the task's mark", time.Since(started).Round(time.Millisecond))
				return
			}
		case <-deadline:
			t.Fatal("no heartbeat listed the running task within 2 s (the interval is an hour)")
		}
	}
}
