// Package flock is the one source of truth for a flock: its agents, their
// UIDs, limits and shared directories, the bus settings and the network plan.
// It is plain Go (no Pulumi types) so that every stack, the bus config
// renderer, the policy pack and the tests read the same validated value.
package flock

import (
	"fmt"
	"net/netip"
	"path"
	"time"
)

// Target names where a flock is deployed.
type Target string

const (
	TargetDocker Target = "docker"
	TargetAWS    Target = "aws"
)

// Model is a validated flock. Build it with Config.Validate; a Model that did
// not come from there may break the invariants the stacks rely on.
type Model struct {
	Name   string // prefix of every resource name
	Target Target
	Agents []Agent // sorted by Slot
	Shared Shared
	Bus    Bus
	Board  Board
	Audit  Audit
	// OTLP is where the flock's spans are exported (none by default).
	OTLP    OTLP
	Network Network
	Gateway ModelGateway
	// Services are the flock's own services (the board): every flock has them.
	Services FlockServices
	// Runtime is the OCI runtime of agent containers ("" = engine default, or "runsc").
	Runtime string
	// Warnings are what the configuration does that the operator should
	// know and may not mean (the stacks print them in the preview).
	Warnings []string
}

// Agent is one member of the flock. ID, Slot, UID, GID and Subnet never
// depend on the other agents, so adding or removing one leaves the rest alone.
type Agent struct {
	ID     string
	Slot   int
	UID    int
	GID    int
	Subnet netip.Prefix // the agent's own network (docker target)
	Limits Limits
	// Program is the agent program's argv as a JSON array (the agent's
	// AGENT_PROGRAM): a long-lived process the agent runs and restarts
	// beside its tasks. "" for none.
	Program string
	Gateway ModelGatewayAccess
	// Labels are what the board lets it claim (a task's labels must all be
	// among them): flock:agents[i].labels. Given to the board service by
	// the deploy; the agent never asserts its own.
	Labels []string
	// Image is the agent's image: the stock one, or the user's with
	// flock-agent added.
	Image Image
	// IDKey is the configuration key its ID comes from, for errors about
	// names derived from it: flock:agents[i].id, or flock:agentCount for
	// the agent-<N> IDs it generates.
	IDKey string
}

// Limits bound what one agent may use.
type Limits struct {
	CPUs        float64       // CPU quota in cores
	MemoryMiB   int           // memory limit; swap is held equal (no swap)
	Pids        int           // process/thread count limit
	TmpfsMiB    int           // size of each of /tmp and /run
	TaskTimeout time.Duration // default timeout of one task
	Concurrency int           // tasks run at once
	DiskMiB     int           // the agent's own directory: a filesystem of this size (docker target)
}

// Shared is the host layout of the shared directory and the flock's state.
type Shared struct {
	Root      string // <root>/agents/<id>, <root>/common, <root>/logs/<id>/<id>.log
	StateRoot string // bus config, JetStream store, per-agent credentials
}

// Bus holds the NATS and JetStream settings.
type Bus struct {
	UID               int
	Heartbeat         time.Duration
	AckWait           time.Duration
	MaxDeliver        int
	MaxPayloadBytes   int
	StreamMaxAge      time.Duration
	StreamMaxBytes    int64
	JetStreamMaxBytes int64 // file store cap for the whole server
	// ResultsBytesPerAgent bounds each agent's results stream.
	ResultsBytesPerAgent int64
	// PeerBytesPerSecond is what the bus reads from any one network peer
	// (an agent, the operator's host); 0: no limit.
	PeerBytesPerSecond int64
	// ConnectionsPerPeer is how many client connections any one network
	// peer may hold open at once; peers the stack names (the operator's
	// side, the flock's services) are not counted.
	ConnectionsPerPeer int
	// Replicas is the number of bus nodes, and of copies of every stream:
	// 1, or 3 (a cluster that keeps every task and result through the loss
	// of any one node).
	Replicas int
	Limits   Limits
}

// DefaultConnectionsPerPeer is flock:bus.connectionsPerPeer's default: an
// agent's runtime holds one connection, its program and tools a few more.
const DefaultConnectionsPerPeer = 8

// MaxConnections is each bus node's limit on client connections: every
// agent at its ConnectionsPerPeer, and room for the operator and the
// flock's services beyond that, so that agents cannot exhaust it.
func (b Bus) MaxConnections(agents int) int { return agents*b.ConnectionsPerPeer + 256 }

// Clustered reports whether the bus runs as a cluster of nodes.
func (b Bus) Clustered() bool { return b.Replicas > 1 }

// BusNodes lists the bus nodes by number: 1 … Replicas.
func (b Bus) BusNodes() []int {
	n := make([]int, max(b.Replicas, 1))
	for i := range n {
		n[i] = i + 1
	}
	return n
}

// PeerBurstBytes is the burst of a peer's byte rate: two of the largest
// messages, or 4 MiB.
func (b Bus) PeerBurstBytes() int64 { return max(4<<20, 2*int64(b.MaxPayloadBytes)) }

// Board is what the board (the flock's shared task list) allows every agent:
// flock:board. The agents' labels are each agent's own (Agent.Labels).
type Board struct {
	// ClaimLimit is how many tasks an agent may hold at once.
	ClaimLimit int
	// AddQuota is how many subtasks an agent may add, all told; 0: none.
	// Beware: protocol.BoardAgent reads an AddQuota of 0 as
	// DefaultBoardAddQuota, so a 0 here cannot be passed on as it is.
	AddQuota int
	// KeepFinished is how long a finished plan stays on the board after its
	// last change before the board service removes it.
	KeepFinished time.Duration
	// Lease is how long a claim lasts unrenewed: a holder silent that long
	// loses it (the agent's runtime renews every lease/3).
	Lease time.Duration
}

// OTLP is flock:otlp: where the flock's spans go.
type OTLP struct {
	// Endpoint is the OTLP/HTTP endpoint the gateway exports spans to
	// ("": none, the default).
	Endpoint string
}

// Audit is flock:audit: the audit trail's retention and store.
type Audit struct {
	// Retention is how long the trail keeps an entry; the writer removes
	// older ones, leaving a checkpoint.
	Retention time.Duration
	// MaxBytes bounds the trail's stream; a full trail refuses entries
	// (the writer logs it) rather than lose them unchecked.
	MaxBytes int64
}

// Network is the address plan for per-agent networks (docker target).
type Network struct {
	Pool         netip.Prefix
	PrefixLength int
}

// AgentDir is the host path of an agent's private directory.
func (s Shared) AgentDir(id string) string { return path.Join(s.Root, "agents", id) }

// CommonDir is the host path of the read-only common directory.
func (s Shared) CommonDir() string { return path.Join(s.Root, "common") }

// LogDiskMiB is the size of the filesystem that holds an agent's log file:
// whatever the agent writes into its log, the host's disk gives no more. It
// is above the runtime's own bound on the file (10 MiB) with room for ext4's
// journal and metadata.
const LogDiskMiB = 16

// LogDir is the host directory of an agent's log: the mount point of its
// log filesystem (LogImage), root's, holding only LogFile.
func (s Shared) LogDir(id string) string { return path.Join(s.Root, "logs", id) }

// LogFile is the host path of an agent's log file (bind-mounted alone at
// protocol.ContainerLogFile).
func (s Shared) LogFile(id string) string { return path.Join(s.LogDir(id), id+".log") }

// LegacyLogFile is where a flock made before log filesystems kept an agent's
// log: a plain host file that the agent's UID could grow without bound.
func (s Shared) LegacyLogFile(id string) string { return path.Join(s.Root, "logs", id+".log") }

// LogImage is the host path of the filesystem image of an agent's log
// (LogDiskMiB). Agent IDs hold no dot, so it never meets a DiskImage.
func (s Shared) LogImage(id string) string { return path.Join(s.StateRoot, "disks", id+".log.img") }

// CredsDir is the host directory of an agent's NATS credentials (root's,
// 0755), mounted read-only at protocol.ContainerCredsDir.
func (s Shared) CredsDir(id string) string { return path.Join(s.StateRoot, "creds", id) }

// CredsFile is the host path of an agent's NATS credentials (0400, its UID).
func (s Shared) CredsFile(id string) string { return path.Join(s.CredsDir(id), "nats.nk") }

// DiskImage is the host path of the filesystem image that holds an agent's
// directory (its size is the agent's diskMiB).
func (s Shared) DiskImage(id string) string { return path.Join(s.StateRoot, "disks", id+".img") }

// BusDir is the host directory of the bus config and JetStream store.
func (s Shared) BusDir() string { return path.Join(s.StateRoot, "bus") }

// Agent returns the agent with the given ID.
func (m Model) Agent(id string) (Agent, bool) {
	for _, a := range m.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// DeclareMembers calls gateway when the flock has a model gateway, then agent
// for each agent in slot order, as both components declare them; an error
// says whose it is.
func (m Model) DeclareMembers(gateway func() error, agent func(Agent) error) error {
	if m.Gateway.Enabled() {
		if err := gateway(); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	for _, a := range m.Agents {
		if err := agent(a); err != nil {
			return fmt.Errorf("agent %s: %w", a.ID, err)
		}
	}
	return nil
}

// AgentIDs lists the agent IDs in slot order.
func (m Model) AgentIDs() []string {
	ids := make([]string, len(m.Agents))
	for i, a := range m.Agents {
		ids[i] = a.ID
	}
	return ids
}

// ResourceName names a child resource of the flock: "<flock>-<parts...>".
func (m Model) ResourceName(parts ...string) string {
	n := m.Name
	for _, p := range parts {
		n += "-" + p
	}
	return n
}

// subnetFor returns the slot-th subnet of the pool.
func (n Network) subnetFor(slot int) (netip.Prefix, error) {
	if !n.Pool.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("pool %s is not IPv4", n.Pool)
	}
	size := uint32(1) << (32 - n.PrefixLength)
	base := n.Pool.Masked().Addr().As4()
	b := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v := b + uint32(slot)*size
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	p := netip.PrefixFrom(a, n.PrefixLength)
	if !n.Pool.Contains(a) {
		return netip.Prefix{}, fmt.Errorf("slot %d is outside pool %s", slot, n.Pool)
	}
	return p, nil
}

// Capacity is how many per-agent subnets the pool holds (slot 0 is unused).
func (n Network) Capacity() int {
	bits := n.PrefixLength - n.Pool.Bits()
	if bits < 0 {
		return 0
	}
	if bits > 20 {
		bits = 20
	}
	return 1 << bits
}
