package protocol

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ports of the bus.
const (
	ClientPort  = 4222
	MonitorPort = 8222
	RoutePort   = 6222 // between the nodes of a clustered bus
)

// Paths inside the bus container: the stacks put the two rendered files
// there, the bus binary reads them from there.
const (
	BusConfigDir    = "/etc/flock/bus"
	BusConfigFile   = BusConfigDir + "/nats.conf"
	BusTopologyFile = BusConfigDir + "/topology.json"
	BusStoreDir     = "/data"
	// BusRuntimeDir is where the bus writes the files it receives through its
	// environment (EncodeEnv) on Fargate: its ephemeral /run volume.
	BusRuntimeDir = "/run/flock-bus"
	// BusReadyFile is rewritten by the bus every few seconds while it is
	// healthy; `flock-bus health` checks it is fresh.
	BusReadyFile = BusRuntimeDir + "/ready"
)

// AgentUser is the bus user an agent's key is derived under: the stacks and
// the test bus derive it the same way, so a key made by one works with the
// other. The operator's is OperatorUser.
func AgentUser(id string) string { return "agent/" + id }

// Topology is the JetStream layout the bus creates and keeps in step: the
// streams and every durable consumer. Consumers on the task stream that it
// does not list (an agent that was removed) are deleted, so interest-based
// retention never waits on an agent that is gone. The infrastructure renders
// it from the flock's model; the bus reads it.
type Topology struct {
	Streams   []jetstream.StreamConfig `json:"streams"`
	Consumers []Consumer               `json:"consumers"`
	// KeyValues are the buckets the flock keeps its state in (the spending
	// ledger), created and updated like the streams.
	KeyValues []jetstream.KeyValueConfig `json:"keyValues,omitempty"`
	// ObjectStores are the object stores (the board's artifacts), created
	// and updated like the streams.
	ObjectStores []jetstream.ObjectStoreConfig `json:"objectStores,omitempty"`
	Peers        PeerLimits                    `json:"peers"`
	// Pool is how the bus hands tasks.pool to agents (pool.go).
	Pool Pool `json:"pool"`
	// Board is what the board service knows of each agent (board.go).
	Board BoardConfig `json:"board"`
}

// MaxSubscriptions bounds the subscriptions of one client connection (the
// bus's rendered max_subscriptions; the server refuses each one past it):
// an agent subscribing to its own inbox without end would otherwise grow
// the bus's memory until its container's limit killed the bus for
// everyone. The flock's own clients hold a few dozen at most.
const MaxSubscriptions = 1024

// PeerLimits bound what the bus reads from any one network peer (an agent,
// or the operator's host): a token bucket per peer address. Zero: no limit.
type PeerLimits struct {
	BytesPerSecond int64 `json:"bytesPerSecond"`
	BurstBytes     int64 `json:"burstBytes"`
	// Connections is how many client connections one peer may hold open
	// at once (0: no limit); peers in Uncounted (CIDR prefixes: the
	// operator's side and the flock's services) are not counted.
	Connections int      `json:"connections"`
	Uncounted   []string `json:"uncounted,omitempty"`
	// Unthrottled are the public keys of the users the bus reads at no
	// rate once the server accepted their CONNECT (the flock's services:
	// their replies to every agent must not queue behind one peer's share).
	Unthrottled []string `json:"unthrottled,omitempty"`
}

// Consumer is a durable consumer of a stream.
type Consumer struct {
	Stream string                   `json:"stream"`
	Config jetstream.ConsumerConfig `json:"config"`
}

// TaskDuplicateWindow is how long the task stream remembers a task's ID
// (its message ID): a task sent again with the same ID within it is not
// stored again.
const TaskDuplicateWindow = 2 * time.Minute
