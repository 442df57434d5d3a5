package flock

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	Network    NetworkConfig           `json:"network"`
	Runtime    string                  `json:"runtime"`
	Gateway    GatewayConfig           `json:"gateway"`
	// Image is every agent's image unless its flock:agents entry names its own.
	Image *ImageConfig `json:"image"`
	// Program is every agent's program unless its flock:agents entry names
	// its own (an empty list there: none).
	Program []string `json:"program"`
}

// AgentConfig is one entry of flock:agents.
type AgentConfig struct {
	ID      string              `json:"id"`
	Slot    *int                `json:"slot"`
	Limits  LimitsConfig        `json:"limits"`
	Program []string            `json:"program"`
	Gateway *AgentGatewayConfig `json:"gateway"`
	Image   *ImageConfig        `json:"image"`
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
)

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	countID     = regexp.MustCompile(`^agent-([1-9][0-9]{0,3})$`)
	// IDs that would collide with bus subjects or users (tasks.pool, tasks.all, ...).
	reservedIDs = map[string]bool{"pool": true, "all": true, "operator": true, "admin": true, "bus": true, "dead": true, "gateway": true, "egress": true}
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
	m := Model{Name: DefaultName, Shared: DefaultShared, Network: DefaultNetwork, Bus: DefaultBus}

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
		if uidBase < 1000 || uidBase > math.MaxInt32-MaxAgents*10 {
			es.add("flock:uidBase", "must be between 1000 and %d so agents never run as root or a system user (got %d)", math.MaxInt32-MaxAgents*10, uidBase)
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

	m.Gateway = c.Gateway.validate(&es, m.Network, uidBase)
	m.Agents = c.agents(&es, defaults, uidBase, m.Network, m.Gateway)
	if len(m.Agents) > 0 {
		m.Bus.ResultsBytesPerAgent = c.Bus.resultsShare(&es, m.Bus, len(m.Agents))
	}
	if len(es) > 0 {
		return Model{}, errors.Join(es...)
	}
	return m, nil
}

func (c Config) agents(es *errs, defaults Limits, uidBase int, net Network, gw Gateway) []Agent {
	type entry struct {
		key     string
		id      string
		slot    *int
		limits  LimitsConfig
		program []string
		gateway *AgentGatewayConfig
		image   *ImageConfig
	}
	// With a gateway, the pool's last two slots are its networks.
	capacity := net.Capacity()
	if gw.Enabled() {
		capacity -= 2
	}
	var entries []entry
	switch {
	case c.AgentCount != nil && len(c.Agents) > 0:
		es.add("flock:agentCount", "set either flock:agentCount or flock:agents, not both")
		return nil
	case len(c.Agents) > 0:
		if len(c.Agents) > MaxAgents {
			es.add("flock:agents", "must list at most %d agents (got %d)", MaxAgents, len(c.Agents))
			return nil
		}
		for i, a := range c.Agents {
			entries = append(entries, entry{key: fmt.Sprintf("flock:agents[%d]", i), id: a.ID, slot: a.Slot, limits: a.Limits, program: a.Program, gateway: a.Gateway, image: a.Image})
		}
	case c.AgentCount != nil:
		n := *c.AgentCount
		if n < 1 || n > MaxAgents {
			es.add("flock:agentCount", "must be between 1 and %d (got %d)", MaxAgents, n)
			return nil
		}
		if n >= capacity {
			es.add("flock:agentCount", "must be between 1 and %d (the per-agent subnets flock:network.pool %s holds at /%d%s) (got %d)", capacity-1, net.Pool, net.PrefixLength, gatewayNote(gw), n)
			return nil
		}
		for i := 1; i <= n; i++ {
			entries = append(entries, entry{key: "flock:agentCount", id: "agent-" + strconv.Itoa(i)})
		}
	default:
		es.add("flock:agentCount", "is required (or list the agents in flock:agents)")
		return nil
	}

	stackProgram := programJSON(es, "flock:program", c.Program)
	stackImage := c.Image.validate(es, "flock:image")
	seenID := map[string]string{}
	seenSlot := map[int]string{}
	var agents []Agent
	for _, e := range entries {
		ok := true
		switch {
		case !protocol.ValidAgentID(e.id):
			es.add(e.key+".id", "%v", &protocol.AgentIDError{ID: e.id})
			ok = false
		case reservedIDs[e.id]:
			es.add(e.key+".id", "%q is reserved for the bus (tasks.%s and friends); choose another ID", e.id, e.id)
			ok = false
		case busNodeID.MatchString(e.id):
			es.add(e.key+".id", "%q is reserved: bus-<n> names the nodes of a clustered bus; choose another ID", e.id)
			ok = false
		case seenID[e.id] != "":
			es.add(e.key+".id", "duplicates %s: agent IDs must be unique (got %q)", seenID[e.id], e.id)
			ok = false
		}
		seenID[e.id] = e.key
		slot := 0
		if e.slot != nil {
			slot = *e.slot
		} else if mm := countID.FindStringSubmatch(e.id); mm != nil {
			slot, _ = strconv.Atoi(mm[1])
		} else if ok {
			es.add(e.key+".slot", "is required for agent %q: only agent-<N> IDs get slot N by default, and the slot fixes the agent's UID and subnet so they never change", e.id)
			ok = false
		}
		if ok {
			switch {
			case slot < 1 || slot >= capacity:
				es.add(e.key+".slot", "must be between 1 and %d (the per-agent subnets in flock:network.pool%s) (got %d)", capacity-1, gatewayNote(gw), slot)
				ok = false
			case seenSlot[slot] != "":
				es.add(e.key+".slot", "duplicates the slot of %s: each agent needs its own slot, UID and subnet (got %d)", seenSlot[slot], slot)
				ok = false
			}
			seenSlot[slot] = e.id
		}
		limits := e.limits.validate(es, e.key+".limits", defaults)
		if ov, has := c.Overrides[e.id]; has {
			limits = ov.validate(es, "flock:overrides."+e.id, limits)
		}
		if !ok {
			continue
		}
		subnet, err := net.subnetFor(slot)
		if err != nil {
			es.add(e.key+".slot", "%v", err)
			continue
		}
		program := stackProgram
		if e.program != nil { // its own, or [] for none
			program = programJSON(es, e.key+".program", e.program)
		}
		access := c.Gateway.access(es, e.key, e.gateway, gw)
		img := stackImage
		if e.image != nil {
			img = e.image.validate(es, e.key+".image")
		}
		idKey := e.key
		if e.key != "flock:agentCount" {
			idKey += ".id"
		}
		agents = append(agents, Agent{ID: e.id, Slot: slot, UID: uidBase + slot, GID: uidBase + slot, Subnet: subnet, Limits: limits, Program: program, Gateway: access, Image: img, IDKey: idKey})
	}
	for id := range c.Overrides {
		if seenID[id] == "" {
			es.add("flock:overrides."+id, "names no agent of this flock (agents: %s)", strings.Join(slices.Sorted(maps.Keys(seenID)), ", "))
		}
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i].Slot < agents[j].Slot })
	return agents
}

func gatewayNote(gw Gateway) string {
	if !gw.Enabled() {
		return ""
	}
	return ", less the last two, which are the gateway's"
}

func (l LimitsConfig) validate(es *errs, key string, base Limits) Limits {
	out := base
	if l.CPUs != nil {
		if v := *l.CPUs; v <= 0 || v > 64 || math.IsNaN(v) {
			es.add(key+".cpus", "must be more than 0 and at most 64 cores (got %v)", v)
		} else if !cpuRoundTrips(v) {
			es.add(key+".cpus", "%v cores cannot be declared exactly: the docker provider reads the quota back as %q and would replace the container on every pulumi up; pick a value that reads back unchanged (0.5, 0.25, 1, 1.5, ...)", v, CPUString(v))
		} else {
			out.CPUs = v
		}
	}
	intIn(es, key+".memoryMiB", l.MemoryMiB, 32, 1<<20, "MiB", &out.MemoryMiB)
	intIn(es, key+".pids", l.Pids, 16, 1<<16, "processes", &out.Pids)
	intIn(es, key+".tmpfsMiB", l.TmpfsMiB, 1, 1<<14, "MiB", &out.TmpfsMiB)
	intIn(es, key+".concurrency", l.Concurrency, 1, 64, "tasks", &out.Concurrency)
	intIn(es, key+".diskMiB", l.DiskMiB, MinDiskMiB, 1<<20, "MiB", &out.DiskMiB)
	durationIn(es, key+".taskTimeout", l.TaskTimeout, time.Second, 24*time.Hour, &out.TaskTimeout)
	if out.TmpfsMiB*2 > out.MemoryMiB && (l.TmpfsMiB != nil || l.MemoryMiB != nil) {
		// tmpfs pages count against the memory limit: /tmp and /run together must fit.
		es.add(key+".tmpfsMiB", "twice the tmpfs size (/tmp and /run) must fit in memoryMiB %d (got %d)", out.MemoryMiB, out.TmpfsMiB)
	}
	return out
}

func intIn(es *errs, key string, v *int, lo, hi int, unit string, dst *int) {
	if v == nil {
		return
	}
	if *v < lo || *v > hi {
		es.add(key, "must be between %d and %d %s (got %d)", lo, hi, unit, *v)
		return
	}
	*dst = *v
}

func durationIn(es *errs, key string, v *string, lo, hi time.Duration, dst *time.Duration) {
	if v == nil {
		return
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		es.add(key, "must be a Go duration such as \"30s\" or \"5m\" (got %q)", *v)
		return
	}
	if d < lo || d > hi {
		es.add(key, "must be between %s and %s (got %s)", lo, hi, d)
		return
	}
	*dst = d
}

func (s SharedConfig) validate(es *errs) Shared {
	out := DefaultShared
	check := func(key, v string, dst *string) {
		if v == "" {
			return
		}
		if !path.IsAbs(v) || path.Clean(v) != v || strings.ContainsAny(v, " \t\n'\"$`\\;&|*?") {
			es.add(key, "must be a clean absolute path without spaces or shell characters (got %q)", v)
			return
		}
		for _, f := range forbiddenRoots {
			if v == f {
				es.add(key, "must not be the system directory %s", f)
				return
			}
		}
		*dst = v
	}
	check("flock:shared.root", s.Root, &out.Root)
	check("flock:shared.stateRoot", s.StateRoot, &out.StateRoot)
	if within(out.Root, out.StateRoot) || within(out.StateRoot, out.Root) {
		es.add("flock:shared.stateRoot", "must not overlap flock:shared.root: the state root holds credentials (got %q and %q)", out.StateRoot, out.Root)
	}
	return out
}

// programJSON validates an agent program's argv and returns it as the JSON
// array the agent reads from AGENT_PROGRAM ("" for none).
func programJSON(es *errs, key string, argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	if !path.IsAbs(argv[0]) {
		es.add(key, "the program must be an absolute path in the agent's container, such as /shared/common/bin/my-agent (got %q)", argv[0])
		return ""
	}
	if len(argv) > 64 {
		es.add(key, "at most 64 arguments (got %d)", len(argv))
		return ""
	}
	for i, a := range argv {
		if a == "" || len(a) > 4096 || strings.ContainsRune(a, 0) {
			es.add(fmt.Sprintf("%s[%d]", key, i), "must be 1 to 4096 bytes with no NUL (got %d bytes)", len(a))
			return ""
		}
	}
	b, _ := json.Marshal(argv)
	return string(b)
}

func within(dir, p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (b BusConfig) validate(es *errs) Bus {
	out := DefaultBus
	durationIn(es, "flock:bus.heartbeatInterval", b.Heartbeat, time.Second, time.Hour, &out.Heartbeat)
	durationIn(es, "flock:bus.ackWait", b.AckWait, time.Second, time.Hour, &out.AckWait)
	durationIn(es, "flock:bus.streamMaxAge", b.StreamMaxAge, time.Minute, 365*24*time.Hour, &out.StreamMaxAge)
	intIn(es, "flock:bus.maxDeliver", b.MaxDeliver, 1, 100, "deliveries", &out.MaxDeliver)
	var kib, streamMiB, jsMiB int = out.MaxPayloadBytes >> 10, int(out.StreamMaxBytes >> 20), int(out.JetStreamMaxBytes >> 20)
	intIn(es, "flock:bus.maxPayloadKiB", b.MaxPayloadKiB, 1, 64<<10, "KiB", &kib)
	intIn(es, "flock:bus.streamMaxMiB", b.StreamMaxMiB, 1, 1<<20, "MiB", &streamMiB)
	intIn(es, "flock:bus.jetStreamMaxMiB", b.JetStreamMaxMiB, 16, 1<<22, "MiB", &jsMiB)
	out.MaxPayloadBytes, out.StreamMaxBytes, out.JetStreamMaxBytes = kib<<10, int64(streamMiB)<<20, int64(jsMiB)<<20
	// The task and dead-letter streams share the JetStream store with the
	// agents' results streams (resultsShare), the status stream and the spending ledger.
	if out.StreamMaxBytes*2+StatusStreamBytes+protocol.LedgerBucketBytes > out.JetStreamMaxBytes {
		es.add("flock:bus.streamMaxMiB", "two streams (tasks, dead letters) of %d MiB must fit in flock:bus.jetStreamMaxMiB %d", streamMiB, jsMiB)
	}
	if int64(out.MaxPayloadBytes) > out.StreamMaxBytes {
		es.add("flock:bus.maxPayloadKiB", "must not exceed flock:bus.streamMaxMiB")
	}
	if b.PeerKiBps != nil {
		if v := *b.PeerKiBps; v != 0 && (v < 64 || v > 1<<22) {
			es.add("flock:bus.peerKiBps", "must be 0 (no limit) or between 64 and %d KiB/s (got %d)", 1<<22, v)
		} else {
			out.PeerBytesPerSecond = int64(v) << 10
		}
	}
	intIn(es, "flock:bus.connectionsPerPeer", b.ConnectionsPerPeer, 2, 1024, "connections", &out.ConnectionsPerPeer)
	if b.Replicas != nil {
		if v := *b.Replicas; v != 1 && v != 3 {
			es.add("flock:bus.replicas", "must be 1 (one bus node) or 3 (a three-node cluster that survives losing one) (got %d)", v)
		} else {
			out.Replicas = v
		}
	}
	out.Limits = b.Limits.validate(es, "flock:bus.limits", DefaultBus.Limits)
	if b.Limits.DiskMiB != nil {
		es.add("flock:bus.limits.diskMiB", "is an agent's limit: the bus's store is bounded by flock:bus.jetStreamMaxMiB")
	}
	return out
}

// resultsShare is the size of each agent's results stream: explicit, or the
// store left after the task and dead-letter streams shared out equally (at
// most DefaultResultsPerAgent). Each share must hold a few of the largest
// results, and all of them must fit in the store.
func (b BusConfig) resultsShare(es *errs, bus Bus, agents int) int64 {
	left := bus.JetStreamMaxBytes - 2*bus.StreamMaxBytes - StatusStreamBytes - protocol.LedgerBucketBytes
	share := min(DefaultResultsPerAgent, left/int64(agents))
	if b.ResultsMiBPerAgent != nil {
		mib := *b.ResultsMiBPerAgent
		if mib < 1 || mib > 1<<20 {
			es.add("flock:bus.resultsMiBPerAgent", "must be between 1 and %d MiB (got %d)", 1<<20, mib)
			return DefaultResultsPerAgent
		}
		share = int64(mib) << 20
		if share*int64(agents) > left {
			es.add("flock:bus.resultsMiBPerAgent", "%d agents × %d MiB must fit in flock:bus.jetStreamMaxMiB %d after the task and dead-letter streams (2 × %d MiB) the status stream and the ledger: at most %d MiB each",
				agents, mib, bus.JetStreamMaxBytes>>20, bus.StreamMaxBytes>>20, max(left/int64(agents), 0)>>20)
		}
		return share
	}
	if share < 4*int64(bus.MaxPayloadBytes) {
		es.add("flock:bus.jetStreamMaxMiB", "%d MiB leaves %d agents %d KiB each for their results after the task and dead-letter streams (2 × %d MiB): each needs room for 4 of the largest messages (4 × %d KiB); raise it or lower flock:bus.streamMaxMiB",
			bus.JetStreamMaxBytes>>20, agents, max(share, 0)>>10, bus.StreamMaxBytes>>20, bus.MaxPayloadBytes>>10)
	}
	return max(share, 0)
}

func (n NetworkConfig) validate(es *errs) Network {
	out := DefaultNetwork
	if n.Pool != "" {
		p, err := netip.ParsePrefix(n.Pool)
		switch {
		case err != nil:
			es.add("flock:network.pool", "must be an IPv4 CIDR such as 10.210.0.0/16 (got %q)", n.Pool)
		case !p.Addr().Is4() || !p.Addr().IsPrivate():
			es.add("flock:network.pool", "must be a private IPv4 range (RFC 1918) (got %q)", n.Pool)
		case p.Masked() != p:
			es.add("flock:network.pool", "must be a network address: %s, not %s", p.Masked(), p)
		default:
			out.Pool = p
		}
	}
	if n.PrefixLength != nil {
		if v := *n.PrefixLength; v < 24 || v > 29 {
			es.add("flock:network.prefixLength", "must be between 24 and 29: each agent network holds a gateway, the bus and the agent (got %d)", v)
		} else {
			out.PrefixLength = v
		}
	}
	if out.PrefixLength <= out.Pool.Bits() {
		es.add("flock:network.prefixLength", "must be longer than the pool's /%d so the pool splits into per-agent subnets (got %d)", out.Pool.Bits(), out.PrefixLength)
	}
	return out
}
