package worker

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// heartbeat publishes the agent's status on agent.<id>.heartbeat.
func (a *Agent) heartbeat() {
	hb := protocol.Heartbeat{
		V: protocol.Version, Agent: a.cfg.ID, Seq: a.hbSeq.Add(1), Time: time.Now().UTC(),
		State: a.state.Load().(string), UptimeMS: time.Since(a.start).Milliseconds(),
		IntervalMS: a.cfg.Heartbeat.Milliseconds(), Running: a.slots.running(),
		Completed: a.completed.Load(), Failed: a.failed.Load(),
		Concurrency: a.cfg.Concurrency, Version: a.cfg.Version,
		Reconnects: a.reconnects.Load(), Board: a.boardHeld.Load().(string),
		Tasks: a.running.list(),
	}
	b, _ := json.Marshal(hb)
	if err := a.nc.Publish(protocol.HeartbeatSubject(a.cfg.ID), b); err != nil {
		a.log.Warn("heartbeat not sent", "err", err)
	}
}

func (a *Agent) heartbeatLoop(ctx context.Context) {
	pace.Every(ctx, a.cfg.Heartbeat, func() bool { a.heartbeat(); return true })
}

// event publishes a lifecycle event on agent.<id>.events.
func (a *Agent) event(typ, ref, detail string) {
	b, _ := json.Marshal(protocol.Event{V: protocol.Version, Agent: a.cfg.ID, Time: time.Now().UTC(), Type: typ, Ref: ref, Detail: detail})
	if err := a.nc.Publish(protocol.EventsSubject(a.cfg.ID), b); err != nil {
		a.log.Warn("event not sent", "type", typ, "err", err)
	}
}

// statusLoop writes the status file every StatusEvery from the session's
// start to its end, and checks the bus (a PING answered) on the way: the
// file says the runtime is alive, and how its bus is.
func (a *Agent) statusLoop(ctx context.Context) {
	every := min(StatusEvery, max(a.cfg.Heartbeat, 100*time.Millisecond))
	a.confirm()
	pace.Every(ctx, every, func() bool { a.confirm(); return true })
}

// confirm pings the bus if the agent is connected (remembering when it
// answered), then writes the status file.
func (a *Agent) confirm() {
	if nc := a.ncp.Load(); nc != nil && nc.IsConnected() && nc.FlushTimeout(2*time.Second) == nil {
		a.busConfirmed.Store(time.Now().UnixNano())
	}
	// One writer at a time, each writing what it reads under the lock: a
	// write that read the state before a newer one cannot land after it
	// (the status loop's first write, before the bus answered, once
	// overwrote "ready" on a loaded CI machine).
	a.statusMu.Lock()
	defer a.statusMu.Unlock()
	st := status{State: a.state.Load().(string), Bus: busUnreachable}
	if nc := a.ncp.Load(); nc != nil && nc.IsConnected() {
		st.Bus = busConnected
	}
	if c := a.busConfirmed.Load(); c != 0 {
		st.BusConfirmed = time.Unix(0, c).UTC()
	}
	if err := writeStatus(a.cfg.StatusFile, st); err != nil {
		a.log.Warn("status file not written", "file", a.cfg.StatusFile, "err", err)
	}
}

// nudgeEvery bounds the extra heartbeats task starts cause: at most one a
// second, a burst of starts sharing it.
const nudgeEvery = time.Second

// nudger sends one heartbeat soon after a task starts, so that what the
// agent runs is seen (flock-agent top) without waiting out the interval.
type nudger struct {
	mu      sync.Mutex
	pending bool
	last    time.Time
}

// nudgeHeartbeat asks for a heartbeat soon: at once when none was nudged
// for a second, else a second after the last one; never two pending.
func (a *Agent) nudgeHeartbeat() {
	n := &a.nudge
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending {
		return
	}
	n.pending = true
	delay := max(50*time.Millisecond, time.Until(n.last.Add(nudgeEvery)))
	time.AfterFunc(delay, func() {
		n.mu.Lock()
		n.pending, n.last = false, time.Now()
		n.mu.Unlock()
		if nc := a.ncp.Load(); nc != nil && !nc.IsClosed() {
			a.heartbeat()
		}
	})
}
