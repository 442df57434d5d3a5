package flock

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Config is the flock's stack configuration as written in Pulumi.<stack>.yaml
// under the "flock:" namespace, before validation. Pointers tell "unset"
// (take the default) from an explicit value.
type Config struct {
	Target     string                  `json:"target"`
	Name       string                  `json:"name"`
	AgentCount *int                    `json:"agentCount"`
	Agents     []AgentConfig           `json:"agents"`
	Overrides  map[string]LimitsConfig `json:"overrides"`
	Limits     LimitsConfig            `json:"limits"`
	UIDBase    *int                    `json:"uidBase"`
	Shared     SharedConfig            `json:"shared"`
	Bus        BusConfig               `json:"bus"`
	Board      BoardConfig             `json:"board"`
	Audit      AuditConfig             `json:"audit"`
	OTLP       OTLPConfig              `json:"otlp"`
	Network    NetworkConfig           `json:"network"`
	Runtime    string                  `json:"runtime"`
	Gateway    ModelGatewayConfig      `json:"gateway"`
	Services   ServicesConfig          `json:"services"`
	// Image is every agent's image unless its flock:agents entry names its own.
	Image *ImageConfig `json:"image"`
	// Program is every agent's program unless its flock:agents entry names
	// its own (an empty list there: none).
	Program []string `json:"program"`
}

// AgentConfig is one entry of flock:agents.
type AgentConfig struct {
	ID      string                   `json:"id"`
	Slot    *int                     `json:"slot"`
	Limits  LimitsConfig             `json:"limits"`
	Program []string                 `json:"program"`
	Gateway *AgentModelGatewayConfig `json:"gateway"`
	Image   *ImageConfig             `json:"image"`
	// Labels are what the board lets the agent claim (none: only tasks
	// with no labels).
	Labels []string `json:"labels"`
}

// LimitsConfig is flock:limits, an agent's limits, or an override.
type LimitsConfig struct {
	CPUs        *float64 `json:"cpus"`
	MemoryMiB   *int     `json:"memoryMiB"`
	Pids        *int     `json:"pids"`
	TmpfsMiB    *int     `json:"tmpfsMiB"`
	TaskTimeout *string  `json:"taskTimeout"`
	Concurrency *int     `json:"concurrency"`
	DiskMiB     *int     `json:"diskMiB"`
}

// SharedConfig is flock:shared.
type SharedConfig struct {
	Root      string `json:"root"`
	StateRoot string `json:"stateRoot"`
}

// BusConfig is flock:bus.
type BusConfig struct {
	Heartbeat       *string `json:"heartbeatInterval"`
	AckWait         *string `json:"ackWait"`
	MaxDeliver      *int    `json:"maxDeliver"`
	MaxPayloadKiB   *int    `json:"maxPayloadKiB"`
	StreamMaxAge    *string `json:"streamMaxAge"`
	StreamMaxMiB    *int    `json:"streamMaxMiB"`
	JetStreamMaxMiB *int    `json:"jetStreamMaxMiB"`
	// ResultsMiBPerAgent bounds each agent's own results stream (default:
	// the store left after the task and dead-letter streams, shared out
	// equally, at most DefaultResultsPerAgent).
	ResultsMiBPerAgent *int `json:"resultsMiBPerAgent"`
	// PeerKiBps bounds what the bus reads from one network peer, so that
	// no agent's flood takes the bus from the others; 0 turns it off.
	PeerKiBps *int `json:"peerKiBps"`
	// ConnectionsPerPeer bounds the client connections one network peer
	// (an agent) holds open at once, so that none can take the bus's
	// connections from the others.
	ConnectionsPerPeer *int `json:"connectionsPerPeer"`
	// Replicas is 1 (one bus node) or 3 (a three-node cluster, every
	// stream kept on all three).
	Replicas *int         `json:"replicas"`
	Limits   LimitsConfig `json:"limits"`
}

// BoardConfig is flock:board: what the board allows every agent.
type BoardConfig struct {
	ClaimLimit   *int    `json:"claimLimit"`
	AddQuota     *int    `json:"addQuota"`
	KeepFinished *string `json:"keepFinished"`
	Lease        *string `json:"lease"`
}

// AuditConfig is flock:audit: how long the audit trail keeps its entries
// and the store it may use.
type AuditConfig struct {
	Retention *string `json:"retention"`
	MaxMiB    *int    `json:"maxMiB"`
}

// NetworkConfig is flock:network.
type NetworkConfig struct {
	Pool         string `json:"pool"`
	PrefixLength *int   `json:"prefixLength"`
}

// Defaults, written down once. The README's configuration reference lists them.
var (
	DefaultLimits = Limits{CPUs: 0.5, MemoryMiB: 256, Pids: 128, TmpfsMiB: 64, TaskTimeout: 5 * time.Minute, Concurrency: 2, DiskMiB: 1024}
	DefaultBus    = Bus{
		Heartbeat: 30 * time.Second, AckWait: 30 * time.Second, MaxDeliver: 5,
		MaxPayloadBytes: 1 << 20, StreamMaxAge: 7 * 24 * time.Hour,
		StreamMaxBytes: 1 << 30, JetStreamMaxBytes: 4 << 30, PeerBytesPerSecond: 1 << 20, ConnectionsPerPeer: DefaultConnectionsPerPeer, Replicas: 1,
		Limits: Limits{CPUs: 1, MemoryMiB: 512, Pids: 512, TmpfsMiB: 16, TaskTimeout: time.Minute, Concurrency: 1},
	}
	DefaultShared  = Shared{Root: "/srv/flock/shared", StateRoot: "/srv/flock/state"}
	DefaultBoard   = Board{ClaimLimit: protocol.DefaultBoardClaimLimit, AddQuota: protocol.DefaultBoardAddQuota, KeepFinished: protocol.DefaultBoardKeepFinished, Lease: protocol.DefaultBoardLease}
	DefaultAudit   = Audit{Retention: protocol.DefaultAuditRetention, MaxBytes: protocol.DefaultAuditBytes}
	DefaultNetwork = Network{Pool: netip.MustParsePrefix("10.210.0.0/16"), PrefixLength: 29}
)

const (
	// DefaultResultsPerAgent caps the derived size of an agent's results stream.
	DefaultResultsPerAgent = 64 << 20
	// StatusStreamBytes is the store the last-heartbeat stream may use.
	StatusStreamBytes = 8 << 20
	DefaultName       = "flock"
	DefaultUIDBase    = 20000
	MaxAgents         = 1000
	// MinDiskMiB is the smallest agent filesystem worth making (ext4 keeps
	// a few MiB for its journal and tables).
	MinDiskMiB = 32
	// DefaultAWSReplicas is flock:bus.replicas on the aws target when it is
	// unset: a three-node cluster (Fargate replaces a lost task, but a lone
	// bus would be down, and its queue unreachable, while it does). On the
	// docker target the default stays one node (DefaultBus).
	DefaultAWSReplicas = 3
	// maxUIDBase leaves every slot's UID below MaxInt32.
	maxUIDBase = math.MaxInt32 - MaxAgents*10
)

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	countID     = regexp.MustCompile(`^agent-([1-9][0-9]{0,3})$`)
	// IDs that would collide with bus subjects or users (tasks.pool, tasks.all, ...).
	reservedIDs = map[string]bool{"pool": true, "all": true, "operator": true, "admin": true, "bus": true, "dead": true, "gateway": true, "egress": true, "services": true}
	// The nodes of a clustered bus are named bus-<n> (their resources, DNS
	// names and services): no agent may take such a name.
	busNodeID = regexp.MustCompile(`^bus-[0-9]+$`)
	// Host paths that must never be the shared or state root.
	forbiddenRoots = []string{"/", "/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/run", "/var/lib/docker", "/usr", "/bin", "/sbin", "/lib", "/root", "/home"}
)

// Error is one configuration problem: the key it concerns and the rule it breaks.
type Error struct {
	Key  string // full config key, e.g. "flock:agents[2].slot"
	Rule string
}

func (e *Error) Error() string { return e.Key + ": " + e.Rule }

type errs []error

func (es *errs) add(key, format string, a ...any) {
	*es = append(*es, &Error{Key: key, Rule: fmt.Sprintf(format, a...)})
}

// Validate turns raw configuration into a Model, or returns every problem at
// once (errors.Join of *Error), each naming its key and the rule it breaks.
func (c Config) Validate() (Model, error) {
	var es errs
	m := Model{Name: DefaultName, Shared: DefaultShared, Network: DefaultNetwork, Bus: DefaultBus, Board: DefaultBoard, Audit: DefaultAudit}

	switch Target(c.Target) {
	case TargetDocker, TargetAWS:
		m.Target = Target(c.Target)
	case "":
		es.add("flock:target", "is required: one of %q, %q", TargetDocker, TargetAWS)
	default:
		es.add("flock:target", "must be one of %q, %q (got %q)", TargetDocker, TargetAWS, c.Target)
	}
	if c.Name != "" {
		if !namePattern.MatchString(c.Name) {
			es.add("flock:name", "must match %s (got %q)", namePattern, c.Name)
		} else {
			m.Name = c.Name
		}
	}
	switch c.Runtime {
	case "", "runc", "runsc":
		m.Runtime = c.Runtime
	default:
		es.add("flock:runtime", "must be empty (engine default), \"runc\" or \"runsc\" (got %q)", c.Runtime)
	}

	uidBase := DefaultUIDBase
	if c.UIDBase != nil {
		uidBase = *c.UIDBase
		if uidBase < 1000 || uidBase > maxUIDBase {
			es.add("flock:uidBase", "must be between 1000 and %d so agents never run as root or a system user (got %d)", maxUIDBase, uidBase)
			uidBase = DefaultUIDBase
		}
	}

	m.Network = c.Network.validate(&es)
	m.Shared = c.Shared.validate(&es)
	defaults := c.Limits.validate(&es, "flock:limits", DefaultLimits)
	m.Bus = c.Bus.validate(&es)
	if c.Bus.Replicas == nil && m.Target == TargetAWS {
		m.Bus.Replicas = DefaultAWSReplicas
	}
	m.Bus.UID = uidBase // slot 0 is the bus's
	m.Board = c.Board.validate(&es)
	m.Audit = c.Audit.validate(&es, m.Bus)

	m.Gateway = c.Gateway.validate(&es, m.Network, uidBase)
	m.Services = c.Services.validate(&es, m.Network, uidBase)
	m.OTLP = c.OTLP.validate(&es, m.Gateway)
	m.Agents = c.agents(&es, defaults, uidBase, m.Network, m.Gateway)
	c.validateEgress(&es, &m)
	if m.Audit.MaxBytes == 0 {
		m.Audit.MaxBytes = defaultAuditBytes(m.Bus, len(m.Agents))
	}
	if len(m.Agents) > 0 {
		m.Bus.ResultsBytesPerAgent = c.Bus.resultsShare(&es, m.Bus, m.Audit, len(m.Agents))
	}
	if len(es) > 0 {
		return Model{}, errors.Join(es...)
	}
	return m, nil
}
