package service

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// An agent's one running task is the one its last heartbeat lists, if the
// heartbeat is fresh, names a task in a trace, and comes from the
// subject's agent, one of the configuration's.
func TestTheOneRunningTaskIsTheLastHeartbeats(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	r := &runningTasks{known: func(id string) bool { return id == "agent-1" || id == "agent-2" }, by: map[string]heartbeatSeen{}, now: func() time.Time { return now }}
	task := protocol.NewTrace()
	hb := func(subject string, traceparents ...string) {
		h := protocol.Heartbeat{Agent: "agent-2", IntervalMS: 1000} // the body's agent is not the one believed
		for _, tp := range traceparents {
			h.Tasks = append(h.Tasks, protocol.RunningTask{ID: "t", Traceparent: tp})
		}
		b, _ := json.Marshal(h)
		r.take(subject, b)
	}
	hb("agent.agent-1.heartbeat", task.String())
	if tp, ok := r.trace("agent-1"); !ok || tp != task {
		t.Fatalf("one task in a trace: %v %v", tp, ok)
	}
	if _, ok := r.trace("agent-2"); ok {
		t.Fatal("agent-2 was given agent-1's task (the body's agent)")
	}
	now = now.Add(3 * time.Second)
	if _, ok := r.trace("agent-1"); ok {
		t.Fatal("a heartbeat three intervals old still ties calls")
	}
	for _, c := range []struct {
		name  string
		tasks []string
	}{{"two tasks", []string{task.String(), protocol.NewTrace().String()}}, {"none", nil}, {"untraced", []string{""}}, {"malformed", []string{"00-xyz"}}} {
		hb("agent.agent-1.heartbeat", c.tasks...)
		if _, ok := r.trace("agent-1"); ok {
			t.Errorf("%s: tied", c.name)
		}
	}
	hb("agent.intruder.heartbeat", task.String())
	if len(r.by) != 1 {
		t.Errorf("kept heartbeats of %d agents, want agent-1's only", len(r.by))
	}
}
