package metrics

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ai-flock/ai-flock/protocol"
)

// upAfter is how many heartbeat intervals an agent may stay silent and
// still count as up (the operator's watch uses the same).
const upAfter = 3

// state is what a scrape reads at that moment: the agents' last heartbeats,
// the streams and the task consumers (two JetStream questions, whatever the
// flock's size), and the board's view.
type state struct{ e *Exporter }

var (
	descAgents   = prometheus.NewDesc("flock_agents", "Agents the flock has (its topology, as the bus applied it).", nil, nil)
	descUp       = prometheus.NewDesc("flock_agent_up", "1 if the agent's last heartbeat came within three of its intervals.", []string{"agent"}, nil)
	descBeatAge  = prometheus.NewDesc("flock_agent_heartbeat_age_seconds", "Time since the agent's last heartbeat (agents heard from since the services started).", []string{"agent"}, nil)
	descRunning  = prometheus.NewDesc("flock_agent_tasks_running", "Tasks the agent was running at its last heartbeat.", []string{"agent"}, nil)
	descQueue    = prometheus.NewDesc("flock_agent_queue_depth", "Tasks waiting for the agent on its own consumer (sent to it, to all, or handed from the pool), not yet delivered.", []string{"agent"}, nil)
	descPool     = prometheus.NewDesc("flock_pool_queue_depth", "Pool tasks waiting for an agent.", nil, nil)
	descInbox    = prometheus.NewDesc("flock_agent_inbox_depth", "Messages waiting in the agent's mailbox for it to take them.", []string{"agent"}, nil)
	descBoard    = prometheus.NewDesc("flock_board_tasks", "The board's tasks, by status.", []string{"status"}, nil)
	descHeld     = prometheus.NewDesc("flock_board_tasks_held", "Board tasks the agent holds (claimed).", []string{"agent"}, nil)
	descBusUp    = prometheus.NewDesc("flock_bus_up", "1 if the services are connected to the bus and its JetStream answered this scrape.", nil, nil)
	descPeers    = prometheus.NewDesc("flock_bus_cluster_peers", "Bus nodes current with the streams' groups (1 for a one-node bus).", nil, nil)
	descBytes    = prometheus.NewDesc("flock_stream_bytes", "Bytes a stream holds.", []string{"stream"}, nil)
	descMsgs     = prometheus.NewDesc("flock_stream_messages", "Messages a stream holds.", []string{"stream"}, nil)
	descMaxBytes = prometheus.NewDesc("flock_stream_max_bytes", "A stream's byte limit (streams without one have no series).", []string{"stream"}, nil)
	descReplicas = prometheus.NewDesc("flock_stream_replicas", "A stream's configured replicas.", []string{"stream"}, nil)
	descCurrent  = prometheus.NewDesc("flock_stream_replicas_current", "A stream's replicas current with its leader, the leader included.", []string{"stream"}, nil)
	descDead     = prometheus.NewDesc("flock_dead_letters", "Tasks parked as dead letters (the dead-letter stream's messages).", nil, nil)
	stateDescs   = []*prometheus.Desc{descAgents, descUp, descBeatAge, descRunning, descQueue, descPool, descInbox, descBoard, descHeld, descBusUp, descPeers, descBytes, descMsgs, descMaxBytes, descReplicas, descCurrent, descDead}
	gauge        = prometheus.GaugeValue
	mustGauge    = prometheus.MustNewConstMetric
)

func (s *state) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range stateDescs {
		ch <- d
	}
}

func (s *state) Collect(ch chan<- prometheus.Metric) {
	e := s.e
	agents := e.cfg.Agents()
	set := make(map[string]bool, len(agents))
	for _, a := range agents {
		set[a] = true
	}
	e.forget(set)
	ch <- mustGauge(descAgents, gauge, float64(len(agents)))

	now := time.Now()
	e.mu.Lock()
	for _, a := range agents {
		b, ok := e.beats[a]
		up := 0.0
		if ok {
			every := time.Duration(b.hb.IntervalMS) * time.Millisecond
			if every <= 0 {
				every = 5 * time.Second
			}
			age := now.Sub(b.seen)
			if age <= upAfter*every {
				up = 1
			}
			ch <- mustGauge(descBeatAge, gauge, age.Seconds(), a)
			ch <- mustGauge(descRunning, gauge, float64(b.hb.Running), a)
		}
		ch <- mustGauge(descUp, gauge, up, a)
	}
	e.mu.Unlock()

	if e.cfg.Board != nil {
		byStatus, heldBy := e.cfg.Board()
		for _, st := range []string{protocol.BoardBlocked, protocol.BoardReady, protocol.BoardClaimed, protocol.BoardDone, protocol.BoardFailed} {
			ch <- mustGauge(descBoard, gauge, float64(byStatus[st]), st)
		}
		for _, a := range agents {
			ch <- mustGauge(descHeld, gauge, float64(heldBy[a]), a)
		}
	}

	busUp := 0.0
	if e.nc.IsConnected() && s.collectJetStream(ch, set) {
		busUp = 1
	}
	ch <- mustGauge(descBusUp, gauge, busUp)
}

// collectJetStream asks for every stream's state and the task consumers';
// false if the bus did not answer.
func (s *state) collectJetStream(ch chan<- prometheus.Metric, agents map[string]bool) bool {
	e := s.e
	ctx, cancel := e.scrapeContext()
	defer cancel()
	peers := map[string]bool{}
	mailOf := map[string]string{}
	inbox := map[string]uint64{} // an agent's mail waiting: its mailbox and the operator's share
	for a := range agents {
		mailOf[protocol.MailStream(a)] = a
		mailOf[protocol.OperatorMailStream(a)] = a
	}
	list := e.js.ListStreams(ctx)
	for si := range list.Info() {
		name := si.Config.Name
		ch <- mustGauge(descBytes, gauge, float64(si.State.Bytes), name)
		ch <- mustGauge(descMsgs, gauge, float64(si.State.Msgs), name)
		if si.Config.MaxBytes > 0 {
			ch <- mustGauge(descMaxBytes, gauge, float64(si.Config.MaxBytes), name)
		}
		ch <- mustGauge(descReplicas, gauge, float64(max(1, si.Config.Replicas)), name)
		ch <- mustGauge(descCurrent, gauge, float64(currentReplicas(si, peers)), name)
		if name == protocol.StreamDead {
			ch <- mustGauge(descDead, gauge, float64(si.State.Msgs))
		}
		if a, ok := mailOf[name]; ok {
			inbox[a] += si.State.Msgs
		}
	}
	for a, n := range inbox {
		ch <- mustGauge(descInbox, gauge, float64(n), a)
	}
	if err := list.Err(); err != nil {
		e.log.Warn("scrape: stream list", "err", err)
		return false
	}
	ch <- mustGauge(descPeers, gauge, float64(max(1, len(peers))))

	tasks, err := e.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		e.log.Warn("scrape: task stream", "err", err)
		return false
	}
	cl := tasks.ListConsumers(ctx)
	for ci := range cl.Info() {
		switch {
		case ci.Name == protocol.ConsumerPool:
			ch <- mustGauge(descPool, gauge, float64(ci.NumPending))
		case agents[ci.Name]:
			ch <- mustGauge(descQueue, gauge, float64(ci.NumPending), ci.Name)
		}
	}
	if err := cl.Err(); err != nil {
		e.log.Warn("scrape: task consumers", "err", err)
		return false
	}
	return true
}

// currentReplicas counts the stream's leader and its current replicas, and
// notes each current node in peers.
func currentReplicas(si *jetstream.StreamInfo, peers map[string]bool) int {
	if si.Cluster == nil || si.Cluster.Leader == "" {
		peers["local"] = true
		return 1
	}
	peers[si.Cluster.Leader] = true
	n := 1
	for _, p := range si.Cluster.Replicas {
		if p != nil && p.Current && !p.Offline {
			peers[p.Name] = true
			n++
		}
	}
	return n
}
