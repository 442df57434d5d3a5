package service

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// runningTasks keeps, per agent, the tasks its last heartbeat listed: the
// gateway ties an untraced call to an agent's one running task. The agent
// is the subject's (agent.<id>.heartbeat, which only that agent may
// publish), and only the configuration's agents are kept.
type runningTasks struct {
	mu    sync.Mutex
	known func(string) bool
	by    map[string]heartbeatSeen
	now   func() time.Time
}

type heartbeatSeen struct {
	tasks    []protocol.RunningTask
	at       time.Time
	interval time.Duration
}

// watchRunning follows the agents' heartbeats until stop.
func watchRunning(nc *nats.Conn, known func(string) bool) (*runningTasks, func(), error) {
	r := &runningTasks{known: known, by: map[string]heartbeatSeen{}, now: time.Now}
	sub, err := nc.Subscribe(protocol.SubjectHeartbeats, func(m *nats.Msg) { r.take(m.Subject, m.Data) })
	if err != nil {
		return nil, nil, err
	}
	return r, func() { _ = sub.Unsubscribe() }, nil
}

func (r *runningTasks) take(subject string, data []byte) {
	t := strings.Split(subject, ".")
	if len(t) != 3 || !r.known(t[1]) {
		return
	}
	var hb protocol.Heartbeat
	if json.Unmarshal(data, &hb) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[t[1]] = heartbeatSeen{tasks: hb.Tasks, at: r.now(), interval: time.Duration(hb.IntervalMS) * time.Millisecond}
}

// trace is the span of agent's one running task, when its last heartbeat
// is fresh (within two of its intervals) and lists exactly one task, in a
// trace.
func (r *runningTasks) trace(agent string) (protocol.TraceParent, bool) {
	r.mu.Lock()
	seen, ok := r.by[agent]
	r.mu.Unlock()
	if !ok || len(seen.tasks) != 1 || r.now().Sub(seen.at) > 2*max(seen.interval, time.Second) {
		return protocol.TraceParent{}, false
	}
	tp, err := protocol.ParseTraceparent(seen.tasks[0].Traceparent)
	return tp, err == nil
}
