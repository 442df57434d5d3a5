// Package busconfig renders the NATS server configuration and the JetStream
// topology of a flock from its model: one nkey user per agent with exactly
// the subjects of the bus contract, an operator user, JetStream with limits,
// monitoring on 8222. The bus binary loads both files; the stacks ship them.
package busconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// PublicKeys are the nkey public keys of every bus user.
type PublicKeys struct {
	Operator string
	Agents   map[string]string // agent ID -> public key
	Gateway  string            // the model gateway's (protocol.GatewayUser); empty: no gateway user
	Services string            // the flock services' (protocol.ServicesUser)
}

// Options tune the rendering per target.
type Options struct {
	// MonitorHost is the address the monitoring endpoint listens on. The dev
	// stack binds it to the bus's own network address so agents, which reach
	// the bus only through their per-agent networks, cannot read it.
	MonitorHost string
	StoreDir    string // JetStream store directory; protocol.BusStoreDir by default

	// For a clustered bus (flock:bus.replicas 3), each node has its own
	// config: Node is its number (1…3), RouteHost the address its route
	// listener binds (one only the bus nodes reach), Routes every node's
	// host for routes, in node order.
	Node      int
	RouteHost string
	Routes    []string
}

// Permissions is a NATS user's permission block.
type Permissions struct {
	Publish   Rule `json:"publish"`
	Subscribe Rule `json:"subscribe"`
}

// Rule lists allowed subjects (everything else is denied).
type Rule struct {
	Allow []string `json:"allow"`
}

type user struct {
	Nkey        string      `json:"nkey"`
	Permissions Permissions `json:"permissions"`
}

type serverConfig struct {
	ServerName    string `json:"server_name"`
	Listen        string `json:"listen"`
	HTTP          string `json:"http"`
	MaxPayload    int    `json:"max_payload"`
	MaxPending    int64  `json:"max_pending"`
	MaxConn       int    `json:"max_connections"`
	MaxSubs       int    `json:"max_subscriptions"`
	PingInterval  string `json:"ping_interval"`
	WriteDeadline string `json:"write_deadline"`
	JetStream     struct {
		StoreDir       string `json:"store_dir"`
		MaxFileStore   int64  `json:"max_file_store"`
		MaxMemoryStore int64  `json:"max_memory_store"`
	} `json:"jetstream"`
	Authorization struct {
		Timeout float64 `json:"timeout"`
		Users   []user  `json:"users"`
	} `json:"authorization"`
	Cluster *cluster `json:"cluster,omitempty"`
}

// cluster is nats-server's cluster block. no_advertise: clients are given
// every node's address by the stack and must not learn the nodes' internal
// listeners from gossip.
type cluster struct {
	Name        string   `json:"name"`
	Listen      string   `json:"listen"`
	Routes      []string `json:"routes"`
	NoAdvertise bool     `json:"no_advertise"`
}

// Render returns the NATS server configuration (JSON, which nats-server reads
// as its config format) for the flock.
func Render(m flock.Model, keys PublicKeys, opt Options) ([]byte, error) {
	if keys.Operator == "" {
		return nil, fmt.Errorf("busconfig: no operator key")
	}
	var c serverConfig
	c.ServerName = m.ResourceName("bus")
	c.Listen = net.JoinHostPort("0.0.0.0", strconv.Itoa(protocol.ClientPort))
	host := opt.MonitorHost
	if host == "" {
		host = "0.0.0.0"
	}
	c.HTTP = net.JoinHostPort(host, strconv.Itoa(protocol.MonitorPort))
	c.MaxPayload = m.Bus.MaxPayloadBytes
	c.MaxPending = 64 << 20
	c.MaxConn = m.Bus.MaxConnections(len(m.Agents))
	c.MaxSubs = protocol.MaxSubscriptions
	c.PingInterval = "20s"
	c.WriteDeadline = "10s"
	c.JetStream.StoreDir = opt.StoreDir
	if c.JetStream.StoreDir == "" {
		c.JetStream.StoreDir = protocol.BusStoreDir
	}
	c.JetStream.MaxFileStore = m.Bus.JetStreamMaxBytes
	c.JetStream.MaxMemoryStore = 64 << 20
	if m.Bus.Clustered() {
		cl, err := clusterBlock(m, opt)
		if err != nil {
			return nil, err
		}
		c.ServerName = m.ResourceName("bus", strconv.Itoa(opt.Node))
		c.Cluster = cl
	}
	c.Authorization.Timeout = 5
	c.Authorization.Users = append(c.Authorization.Users, user{Nkey: keys.Operator, Permissions: OperatorPermissions()})
	for _, a := range m.Agents {
		k := keys.Agents[a.ID]
		if k == "" {
			return nil, fmt.Errorf("busconfig: no key for agent %q", a.ID)
		}
		c.Authorization.Users = append(c.Authorization.Users, user{Nkey: k, Permissions: AgentPermissions(a.ID)})
	}
	if m.Gateway.Enabled() && keys.Gateway == "" {
		return nil, fmt.Errorf("busconfig: no key for the gateway")
	}
	if keys.Gateway != "" {
		c.Authorization.Users = append(c.Authorization.Users, user{Nkey: keys.Gateway, Permissions: GatewayPermissions()})
	}
	if keys.Services == "" {
		return nil, fmt.Errorf("busconfig: no key for the flock services")
	}
	c.Authorization.Users = append(c.Authorization.Users, user{Nkey: keys.Services, Permissions: ServicesPermissions()})
	return marshal(c)
}

// clusterBlock is the cluster block of node opt.Node.
func clusterBlock(m flock.Model, opt Options) (*cluster, error) {
	if opt.Node < 1 || opt.Node > m.Bus.Replicas {
		return nil, fmt.Errorf("busconfig: node %d of a %d-node bus", opt.Node, m.Bus.Replicas)
	}
	if len(opt.Routes) != m.Bus.Replicas {
		return nil, fmt.Errorf("busconfig: %d route hosts for a %d-node bus", len(opt.Routes), m.Bus.Replicas)
	}
	if opt.RouteHost == "" {
		return nil, fmt.Errorf("busconfig: node %d has no route host", opt.Node)
	}
	cl := &cluster{
		Name:        m.ResourceName("bus"),
		Listen:      net.JoinHostPort(opt.RouteHost, strconv.Itoa(protocol.RoutePort)),
		NoAdvertise: true,
	}
	for i, h := range opt.Routes {
		if i+1 == opt.Node {
			continue // not a route to itself
		}
		cl.Routes = append(cl.Routes, "nats-route://"+net.JoinHostPort(h, strconv.Itoa(protocol.RoutePort)))
	}
	return cl, nil
}

// marshal writes indented JSON without HTML escaping: nats-server's config
// parser rejects \u003e, and subjects are full of ">".
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Peers is what a stack knows of the bus's peers beyond the model.
type Peers struct {
	// Uncounted: the ranges whose connections count against no agent's
	// share (the operator's side and the flock's services, as each stack
	// places them).
	Uncounted []netip.Prefix
	// Unthrottled: the public keys of the users whose connections the bus
	// reads at no peer rate once the server accepted them (the flock's
	// services: their replies to every agent and their own bucket work
	// must not queue behind one peer's share; on aws their address is not
	// known before they run, so the bus knows them by their key).
	Unthrottled []string
}

// BuildTopology derives the streams and consumers from the model, and the
// bounds of what the bus reads from each peer.
func BuildTopology(m flock.Model, p Peers) protocol.Topology {
	b := m.Bus
	peers := protocol.PeerLimits{BytesPerSecond: b.PeerBytesPerSecond, BurstBytes: b.PeerBurstBytes(), Connections: b.ConnectionsPerPeer}
	for _, pfx := range p.Uncounted {
		peers.Uncounted = append(peers.Uncounted, pfx.Masked().String())
	}
	peers.Unthrottled = append(peers.Unthrottled, p.Unthrottled...)
	t := protocol.Topology{Peers: peers, Streams: []jetstream.StreamConfig{
		{
			// Interest retention: a task stays until every consumer that
			// should run it has acked it; DiscardNew makes a full stream
			// refuse new tasks (the publisher sees an error) instead of
			// dropping old ones.
			Name: protocol.StreamTasks, Subjects: []string{protocol.SubjectTasks},
			Retention: jetstream.InterestPolicy, Discard: jetstream.DiscardNew,
			Storage: jetstream.FileStorage, MaxAge: b.StreamMaxAge, MaxBytes: b.StreamMaxBytes,
			MaxMsgSize: int32(b.MaxPayloadBytes), Duplicates: protocol.TaskDuplicateWindow, Replicas: b.Replicas,
		},
		{
			Name: protocol.StreamDead, Subjects: []string{protocol.SubjectDead},
			Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardNew,
			Storage: jetstream.FileStorage, MaxAge: b.StreamMaxAge, MaxBytes: b.StreamMaxBytes,
			Replicas: b.Replicas,
		},
		{
			// The last heartbeat of each agent, so the operator can list
			// agents with their last status without waiting an interval.
			Name: protocol.StreamStatus, Subjects: []string{protocol.SubjectHeartbeats},
			Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
			Storage: jetstream.FileStorage, MaxMsgsPerSubject: 1, MaxAge: b.StreamMaxAge,
			MaxBytes: flock.StatusStreamBytes, MaxMsgSize: 64 << 10, Replicas: b.Replicas,
		},
	}}
	// The audit trail: one entry per thing done on the bus, chained by
	// hash, written only by the flock's services. No MaxAge: the writer
	// removes what is older than the retention itself, after leaving a
	// checkpoint, so that a verifier tells retention from a deletion; a
	// full trail refuses new entries instead of dropping old ones.
	t.Streams = append(t.Streams, jetstream.StreamConfig{
		Name: protocol.AuditStream, Subjects: []string{protocol.AuditSubject},
		Description: "the audit trail: who did what on the bus, hash-chained (the flock services' audit writer)",
		Retention:   jetstream.LimitsPolicy, Discard: jetstream.DiscardNew,
		Storage: jetstream.FileStorage, MaxBytes: m.Audit.MaxBytes, MaxMsgSize: int32(min(64<<10, b.MaxPayloadBytes)), Replicas: b.Replicas,
		Metadata: map[string]string{protocol.AuditRetentionMeta: m.Audit.Retention.String()},
	})
	// Every key-value bucket is on file storage, replicated like the streams.
	bucket := func(name, description string, history uint8, maxBytes int64, maxValueSize int32) {
		t.KeyValues = append(t.KeyValues, jetstream.KeyValueConfig{
			Bucket: name, Description: description,
			History: history, MaxBytes: maxBytes, MaxValueSize: maxValueSize,
			Storage: jetstream.FileStorage, Replicas: b.Replicas,
		})
	}
	bucket(protocol.AuditAnchorsBucket, "the audit trail's anchored head and retention checkpoint (the audit writer's)",
		8, protocol.AuditAnchorsBytes, protocol.AuditAnchorsValueBytes)
	// The spending ledger: one entry per agent, replicated like the
	// streams, so a gateway that restarts (or a second one) continues from
	// the same totals.
	bucket(protocol.LedgerBucket, "tokens each agent spent against its budget (the model gateway's ledger)",
		1, protocol.LedgerBucketBytes, 4<<10)
	// The board: the flock's shared task list, one entry per task, written
	// only by the board service the flock's services run (agents ask it; they have no
	// permission on the bucket). What it knows of each agent (labels,
	// limits) comes from here, never from the agent.
	bucket(protocol.BoardBucket, "the board: the flock's shared tasks, their claims and results (the board service's)",
		1, protocol.BoardBucketBytes, protocol.BoardValueBytes)
	// What the flock's services know of the agents: written by the bus
	// from this topology, read by the services (their own bus user).
	bucket(protocol.ServicesBucket, "the flock services' configuration: what the board knows of each agent (written by the bus)",
		1, protocol.ServicesBucketBytes, 16<<10)
	// The board's artifacts: what tasks leave for the tasks that need
	// them, written and read only through the board service.
	t.ObjectStores = append(t.ObjectStores, jetstream.ObjectStoreConfig{
		Bucket: protocol.ArtifactBucket, Description: "the board's artifacts: what tasks leave for the tasks that need them (the board service's)",
		MaxBytes: protocol.ArtifactStoreBytes, Storage: jetstream.FileStorage, Replicas: b.Replicas,
	})
	t.Board.KeepFinished = protocol.Duration(m.Board.KeepFinished)
	t.Board.Lease = protocol.Duration(m.Board.Lease)
	for _, a := range m.Agents {
		// The model holds the resolved values (flock:board.*): a quota of 0 means none.
		quota := m.Board.AddQuota
		t.Board.Agents = append(t.Board.Agents, protocol.BoardAgent{ID: a.ID, Labels: a.Labels, ClaimLimit: m.Board.ClaimLimit, AddQuota: &quota})
	}
	// One results stream per agent, each bounded on its own: an agent that
	// floods its result subject evicts only its own oldest results (the
	// operator still sees every result live on task.result.>).
	for _, a := range m.Agents {
		t.Streams = append(t.Streams, jetstream.StreamConfig{
			Name: protocol.ResultsStream(a.ID), Subjects: []string{protocol.ResultSubject(a.ID)},
			Description: "results of agent " + a.ID,
			Retention:   jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
			Storage: jetstream.FileStorage, MaxAge: b.StreamMaxAge, MaxBytes: b.ResultsBytesPerAgent,
			MaxMsgSize: int32(min(int64(b.MaxPayloadBytes), b.ResultsBytesPerAgent)), Replicas: b.Replicas,
		})
	}
	// One mailbox per agent: its inbox subject, kept until the agent takes
	// each message (work queue), bounded per agent and per sender (a full
	// share refuses the sender instead of dropping older mail).
	for _, a := range m.Agents {
		t.Streams = append(t.Streams, jetstream.StreamConfig{
			Name: protocol.MailStream(a.ID), Subjects: []string{protocol.InboxOf(a.ID)},
			Description: "mailbox of agent " + a.ID + ": messages waiting for it",
			Retention:   jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true,
			MaxMsgsPerSubject: protocol.MailPerSender, MaxMsgs: protocol.MailMessages, MaxBytes: protocol.SharedMailBytes,
			MaxMsgSize: protocol.MailMessageBytes + 4<<10, // the body and its headers
			Storage:    jetstream.FileStorage, MaxAge: b.StreamMaxAge, Duplicates: protocol.MailDuplicateWindow, Replicas: b.Replicas,
		})
		// The operator's share beside it: its own subject, which no agent
		// may publish on, so no number of agents filling the mailbox above
		// can refuse the operator's mail.
		t.Streams = append(t.Streams, jetstream.StreamConfig{
			Name: protocol.OperatorMailStream(a.ID), Subjects: []string{protocol.OperatorInboxSubject(a.ID)},
			Description: "the operator's mail to agent " + a.ID + ": its share of the mailbox",
			Retention:   jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew,
			MaxMsgs: protocol.MailPerSender, MaxBytes: protocol.OperatorMailBytes,
			MaxMsgSize: protocol.MailMessageBytes + 4<<10,
			Storage:    jetstream.FileStorage, MaxAge: b.StreamMaxAge, Duplicates: protocol.MailDuplicateWindow, Replicas: b.Replicas,
		})
		for _, stream := range []string{protocol.MailStream(a.ID), protocol.OperatorMailStream(a.ID)} {
			t.Consumers = append(t.Consumers, protocol.Consumer{Stream: stream, Config: jetstream.ConsumerConfig{
				Durable:       protocol.MailConsumer,
				Description:   "agent " + a.ID + " takes its mail",
				DeliverPolicy: jetstream.DeliverAllPolicy,
				AckPolicy:     jetstream.AckExplicitPolicy,
				AckWait:       time.Minute,
				MaxAckPending: protocol.MailMessages,
			}})
		}
	}
	pending := 0
	t.Pool.Grace = protocol.Duration(PoolGrace)
	for _, a := range m.Agents {
		pending += a.Limits.Concurrency
		t.Pool.Agents = append(t.Pool.Agents, protocol.PoolAgent{ID: a.ID, Slots: a.Limits.Concurrency, TaskTimeout: protocol.Duration(a.Limits.TaskTimeout)})
		t.Consumers = append(t.Consumers, protocol.Consumer{Stream: protocol.StreamTasks, Config: jetstream.ConsumerConfig{
			Durable:         protocol.AgentConsumer(a.ID),
			Description:     "tasks of agent " + a.ID + " (its own, tasks.all and the pool tasks the bus gives it)",
			FilterSubjects:  []string{protocol.TaskSubject(a.ID), protocol.SubjectTasksAll, protocol.PoolTaskSubject(a.ID)},
			DeliverPolicy:   jetstream.DeliverAllPolicy,
			AckPolicy:       jetstream.AckExplicitPolicy,
			AckWait:         b.AckWait,
			MaxDeliver:      b.MaxDeliver,
			MaxAckPending:   a.Limits.Concurrency,
			MaxRequestBatch: a.Limits.Concurrency,
		}})
	}
	t.Consumers = append(t.Consumers, protocol.Consumer{Stream: protocol.StreamTasks, Config: jetstream.ConsumerConfig{
		Durable:       protocol.ConsumerPool,
		Description:   "shared work queue: the bus hands each tasks.pool task to one agent with a free slot",
		FilterSubject: protocol.SubjectTasksPool,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.AckWait,
		MaxDeliver:    b.MaxDeliver,
		MaxAckPending: max(pending, 1),
	}})
	return t
}

// PoolGrace is how long past a pool task's timeout the agent given it may
// take to answer (its runtime stops the task at the timeout, then writes and
// publishes the result) before the bus takes the task back.
const PoolGrace = 15 * time.Second

// RenderTopology returns the topology as JSON.
func RenderTopology(m flock.Model, p Peers) ([]byte, error) {
	return marshal(BuildTopology(m, p))
}
