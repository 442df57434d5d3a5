package flock

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

func ip(n int) *int         { return &n }
func fp(f float64) *float64 { return &f }
func sp(s string) *string   { return &s }
func base(n int) Config     { return Config{Target: "docker", AgentCount: &n} }
func with(f func(*Config)) Config {
	c := base(3)
	f(&c)
	return c
}

// Every validation rule, each with the key it must name and the words of its rule.
func TestValidateRules(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		key  string
		rule string
	}{
		{"target missing", Config{AgentCount: ip(1)}, "flock:target", "is required"},
		{"target unknown", with(func(c *Config) { c.Target = "k8s" }), "flock:target", `must be one of "docker", "aws" (got "k8s")`},
		{"name pattern", with(func(c *Config) { c.Name = "Flock_1" }), "flock:name", "must match"},
		{"runtime unknown", with(func(c *Config) { c.Runtime = "kata" }), "flock:runtime", `(got "kata")`},
		{"uidBase low", with(func(c *Config) { c.UIDBase = ip(0) }), "flock:uidBase", "never run as root"},
		{"count and list", with(func(c *Config) { c.Agents = []AgentConfig{{ID: "agent-1"}} }), "flock:agentCount", "not both"},
		{"no agents", Config{Target: "docker"}, "flock:agentCount", "is required"},
		{"count zero", base(0), "flock:agentCount", "between 1 and 1000 (got 0)"},
		{"count too many", base(1001), "flock:agentCount", "between 1 and 1000 (got 1001)"},
		{"id pattern", Config{Target: "docker", Agents: []AgentConfig{{ID: "Agent_1", Slot: ip(1)}}}, "flock:agents[0].id", "must match ^[a-z][a-z0-9-]{0,30}$"},
		{"id too long", Config{Target: "docker", Agents: []AgentConfig{{ID: "a" + strings.Repeat("b", 31), Slot: ip(1)}}}, "flock:agents[0].id", "must match"},
		{"id reserved", Config{Target: "docker", Agents: []AgentConfig{{ID: "pool", Slot: ip(1)}}}, "flock:agents[0].id", "reserved"},
		{"id of a bus node", Config{Target: "aws", Agents: []AgentConfig{{ID: "bus-2", Slot: ip(1)}}}, "flock:agents[0].id", `"bus-2" is reserved: bus-<n> names the nodes of a clustered bus`},
		{"replicas two on aws", Config{Target: "aws", AgentCount: ip(3), Bus: BusConfig{Replicas: ip(2)}}, "flock:bus.replicas", "(got 2)"},
		{"id duplicate", Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-1"}, {ID: "agent-1", Slot: ip(2)}}}, "flock:agents[1].id", "duplicates flock:agents[0]"},
		{"slot required", Config{Target: "docker", Agents: []AgentConfig{{ID: "researcher"}}}, "flock:agents[0].slot", "is required for agent \"researcher\""},
		{"slot range", Config{Target: "docker", Agents: []AgentConfig{{ID: "researcher", Slot: ip(0)}}}, "flock:agents[0].slot", "between 1 and 8188 (the per-agent subnets"},
		{"slot duplicate", Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-2"}, {ID: "writer", Slot: ip(2)}}}, "flock:agents[1].slot", "duplicates the slot of agent-2"},
		{"override unknown", with(func(c *Config) { c.Overrides = map[string]LimitsConfig{"agent-9": {}} }), "flock:overrides.agent-9", "names no agent of this flock"},
		{"cpus", with(func(c *Config) { c.Limits.CPUs = fp(0) }), "flock:limits.cpus", "more than 0"},
		{"cpus provider rounds", with(func(c *Config) { c.Limits.CPUs = fp(0.05) }), "flock:limits.cpus", `reads the quota back as "0.1"`},
		{"bus cpus provider rounds", with(func(c *Config) { c.Bus.Limits.CPUs = fp(10.05) }), "flock:bus.limits.cpus", `reads the quota back as "10.1"`},
		{"memory", with(func(c *Config) { c.Limits.MemoryMiB = ip(8) }), "flock:limits.memoryMiB", "between 32 and"},
		{"pids", with(func(c *Config) { c.Limits.Pids = ip(4) }), "flock:limits.pids", "between 16 and"},
		{"tmpfs", with(func(c *Config) { c.Limits.TmpfsMiB = ip(0) }), "flock:limits.tmpfsMiB", "between 1 and"},
		{"disk too small", with(func(c *Config) { c.Limits.DiskMiB = ip(8) }), "flock:limits.diskMiB", "between 32 and"},
		{"disk override", with(func(c *Config) { c.Overrides = map[string]LimitsConfig{"agent-2": {DiskMiB: ip(1 << 21)}} }), "flock:overrides.agent-2.diskMiB", "between 32 and 1048576 MiB"},
		{"peer rate", with(func(c *Config) { c.Bus.PeerKiBps = ip(8) }), "flock:bus.peerKiBps", "must be 0 (no limit) or between 64 and"},
		{"replicas two", with(func(c *Config) { c.Bus.Replicas = ip(2) }), "flock:bus.replicas", "must be 1 (one bus node) or 3 (a three-node cluster that survives losing one) (got 2)"},
		{"replicas zero", with(func(c *Config) { c.Bus.Replicas = ip(0) }), "flock:bus.replicas", "(got 0)"},
		{"bus disk", with(func(c *Config) { c.Bus.Limits.DiskMiB = ip(64) }), "flock:bus.limits.diskMiB", "the bus's store is bounded by flock:bus.jetStreamMaxMiB"},
		{"tmpfs vs memory", with(func(c *Config) { c.Limits.TmpfsMiB = ip(200) }), "flock:limits.tmpfsMiB", "must fit in memoryMiB 256"},
		{"concurrency", with(func(c *Config) { c.Limits.Concurrency = ip(0) }), "flock:limits.concurrency", "between 1 and 64"},
		{"timeout syntax", with(func(c *Config) { c.Limits.TaskTimeout = sp("5 minutes") }), "flock:limits.taskTimeout", "Go duration"},
		{"timeout range", with(func(c *Config) { c.Limits.TaskTimeout = sp("1ms") }), "flock:limits.taskTimeout", "between 1s and 24h0m0s"},
		{"agent limits", Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-1", Limits: LimitsConfig{Pids: ip(1)}}}}, "flock:agents[0].limits.pids", "between 16"},
		{"override limits", with(func(c *Config) { c.Overrides = map[string]LimitsConfig{"agent-2": {MemoryMiB: ip(1)}} }), "flock:overrides.agent-2.memoryMiB", "between 32"},
		{"shared relative", with(func(c *Config) { c.Shared.Root = "srv/shared" }), "flock:shared.root", "clean absolute path"},
		{"shared shell chars", with(func(c *Config) { c.Shared.Root = "/srv/a;rm -rf" }), "flock:shared.root", "shell characters"},
		{"shared system dir", with(func(c *Config) { c.Shared.Root = "/etc" }), "flock:shared.root", "system directory /etc"},
		{"state overlaps", with(func(c *Config) { c.Shared.StateRoot = "/srv/flock/shared/state" }), "flock:shared.stateRoot", "must not overlap"},
		{"heartbeat", with(func(c *Config) { c.Bus.Heartbeat = sp("100ms") }), "flock:bus.heartbeatInterval", "between 1s"},
		{"ackWait", with(func(c *Config) { c.Bus.AckWait = sp("x") }), "flock:bus.ackWait", "Go duration"},
		{"maxDeliver", with(func(c *Config) { c.Bus.MaxDeliver = ip(0) }), "flock:bus.maxDeliver", "between 1 and 100"},
		{"payload", with(func(c *Config) { c.Bus.MaxPayloadKiB = ip(1 << 20) }), "flock:bus.maxPayloadKiB", "between 1 and 65536"},
		{"streams fit", with(func(c *Config) { c.Bus.StreamMaxMiB = ip(2048) }), "flock:bus.streamMaxMiB", "must fit in flock:bus.jetStreamMaxMiB"},
		{"results share range", with(func(c *Config) { c.Bus.ResultsMiBPerAgent = ip(0) }), "flock:bus.resultsMiBPerAgent", "between 1 and"},
		{"results shares fit", with(func(c *Config) { c.Bus.ResultsMiBPerAgent = ip(1024) }), "flock:bus.resultsMiBPerAgent", "agents × 1024 MiB must fit in flock:bus.jetStreamMaxMiB 4096"},
		{"results shares too small", func() Config {
			c := base(900)
			c.Network.PrefixLength = ip(28)
			c.Bus.JetStreamMaxMiB = ip(4000) // 2 MiB of it for each agent's mailbox
			return c
		}(), "flock:bus.jetStreamMaxMiB", "leaves 900 agents 122 KiB each for their results"},
		{"bus limits", with(func(c *Config) { c.Bus.Limits.MemoryMiB = ip(1) }), "flock:bus.limits.memoryMiB", "between 32"},
		{"audit retention syntax", with(func(c *Config) { c.Audit.Retention = sp("forever") }), "flock:audit.retention", "Go duration"},
		{"audit retention short", with(func(c *Config) { c.Audit.Retention = sp("1m") }), "flock:audit.retention", "between 1h0m0s"},
		{"audit store small", with(func(c *Config) { c.Audit.MaxMiB = ip(1) }), "flock:audit.maxMiB", "between 16 and"},
		{"audit store fits", with(func(c *Config) { c.Audit.MaxMiB = ip(3000) }), "flock:audit.maxMiB", "must fit in flock:bus.jetStreamMaxMiB 4096"},
		{"audit store and results", with(func(c *Config) { c.Audit.MaxMiB = ip(2000); c.Bus.ResultsMiBPerAgent = ip(16) }), "flock:bus.resultsMiBPerAgent", "must fit in flock:bus.jetStreamMaxMiB"},
		{"otlp no gateway", with(func(c *Config) { c.OTLP.Endpoint = "http://collector:4318" }), "flock:otlp.endpoint", "needs a model gateway"},
		{"otlp scheme", with(func(c *Config) { c.OTLP.Endpoint = "grpc://collector:4317" }), "flock:otlp.endpoint", "http:// or https://"},
		{"otlp credentials", with(func(c *Config) { c.OTLP.Endpoint = "https://u:secret@collector" }), "flock:otlp.endpoint", "must not carry a user or password"},
		{"otlp no host", with(func(c *Config) { c.OTLP.Endpoint = "http:///v1/traces" }), "flock:otlp.endpoint", "has no host"},
		{"claim limit zero", with(func(c *Config) { c.Board.ClaimLimit = ip(0) }), "flock:board.claimLimit", "must be between 1 and 100 tasks (got 0)"},
		{"claim limit high", with(func(c *Config) { c.Board.ClaimLimit = ip(101) }), "flock:board.claimLimit", "must be between 1 and 100 tasks (got 101)"},
		{"add quota negative", with(func(c *Config) { c.Board.AddQuota = ip(-1) }), "flock:board.addQuota", "must be between 0 and 10000 tasks (got -1)"},
		{"add quota high", with(func(c *Config) { c.Board.AddQuota = ip(10001) }), "flock:board.addQuota", "must be between 0 and 10000 tasks (got 10001)"},
		{"keep finished short", with(func(c *Config) { c.Board.KeepFinished = sp("30s") }), "flock:board.keepFinished", "1m0s"},
		{"lease short", with(func(c *Config) { c.Board.Lease = sp("1s") }), "flock:board.lease", "5s"},
		{"lease bad", with(func(c *Config) { c.Board.Lease = sp("soon") }), "flock:board.lease", "Go duration"},
		{"keep finished bad", with(func(c *Config) { c.Board.KeepFinished = sp("a week") }), "flock:board.keepFinished", "Go duration"},
		{"pool syntax", with(func(c *Config) { c.Network.Pool = "10.210.0.0" }), "flock:network.pool", "IPv4 CIDR"},
		{"pool public", with(func(c *Config) { c.Network.Pool = "8.8.0.0/16" }), "flock:network.pool", "private IPv4"},
		{"pool unmasked", with(func(c *Config) { c.Network.Pool = "10.210.0.1/16" }), "flock:network.pool", "network address: 10.210.0.0/16"},
		{"prefix range", with(func(c *Config) { c.Network.PrefixLength = ip(30) }), "flock:network.prefixLength", "between 24 and 29"},
		{"prefix vs pool", with(func(c *Config) { c.Network.Pool = "10.210.0.0/28"; c.Network.PrefixLength = ip(24) }), "flock:network.prefixLength", "longer than the pool's /28"},
		{"pool too small", func() Config { c := base(5); c.Network.Pool = "10.210.0.0/26"; return c }(), "flock:agentCount", "between 1 and 4 (the per-agent subnets flock:network.pool 10.210.0.0/26 holds at /29, less the last three, which are the flock's own: the gateway's and the services') (got 5)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Validate()
			if err == nil {
				t.Fatalf("accepted; want an error on %s", tc.key)
			}
			var found bool
			for _, e := range protocol.Problems(err) {
				var fe *Error
				if errors.As(e, &fe) && fe.Key == tc.key && strings.Contains(fe.Rule, tc.rule) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want %s: …%s…\n got: %v", tc.key, tc.rule, err)
			}
		})
	}
}

// All problems come back at once, not one per preview.
func TestValidateReportsEveryProblem(t *testing.T) {
	c := with(func(c *Config) {
		c.Target = "nope"
		c.Limits.Pids = ip(1)
		c.Network.PrefixLength = ip(99)
		c.Board.ClaimLimit = ip(0)
	})
	_, err := c.Validate()
	if n := len(protocol.Problems(err)); n != 4 {
		t.Fatalf("got %d errors, want 4: %v", n, err)
	}
}

func TestDefaults(t *testing.T) {
	m, err := base(3).Validate()
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "flock" || len(m.Agents) != 3 || m.Agents[0].Limits != DefaultLimits || m.Bus.Heartbeat != 30*time.Second {
		t.Fatalf("defaults not applied: %+v", m)
	}
	want := []Agent{
		{ID: "agent-1", Slot: 1, UID: 20001, GID: 20001, Subnet: netip.MustParsePrefix("10.210.0.8/29"), Limits: DefaultLimits, IDKey: "flock:agentCount"},
		{ID: "agent-2", Slot: 2, UID: 20002, GID: 20002, Subnet: netip.MustParsePrefix("10.210.0.16/29"), Limits: DefaultLimits, IDKey: "flock:agentCount"},
		{ID: "agent-3", Slot: 3, UID: 20003, GID: 20003, Subnet: netip.MustParsePrefix("10.210.0.24/29"), Limits: DefaultLimits, IDKey: "flock:agentCount"},
	}
	for i, a := range m.Agents {
		if !reflect.DeepEqual(a, want[i]) {
			t.Errorf("agent %d = %+v, want %+v", i, a, want[i])
		}
	}
	if m.Bus.UID != 20000 {
		t.Errorf("bus UID %d: slot 0 of the UID range belongs to the bus", m.Bus.UID)
	}
	if want := (Board{ClaimLimit: protocol.DefaultBoardClaimLimit, AddQuota: protocol.DefaultBoardAddQuota, KeepFinished: protocol.DefaultBoardKeepFinished, Lease: protocol.DefaultBoardLease}); m.Board != want || DefaultBoard != want {
		t.Errorf("board %+v (DefaultBoard %+v), want the protocol's defaults %+v", m.Board, DefaultBoard, want)
	}
}

// flock:board sets what the board allows every agent: the ends of each
// range are accepted, an addQuota of 0 (no subtasks) included, and a key
// left unset keeps its default.
func TestBoardSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg  BoardConfig
		want Board
	}{
		{BoardConfig{}, DefaultBoard},
		{BoardConfig{ClaimLimit: ip(1), AddQuota: ip(0)}, Board{ClaimLimit: 1, AddQuota: 0, KeepFinished: DefaultBoard.KeepFinished, Lease: DefaultBoard.Lease}},
		{BoardConfig{ClaimLimit: ip(100), AddQuota: ip(10000)}, Board{ClaimLimit: 100, AddQuota: 10000, KeepFinished: DefaultBoard.KeepFinished, Lease: DefaultBoard.Lease}},
		{BoardConfig{ClaimLimit: ip(4)}, Board{ClaimLimit: 4, AddQuota: DefaultBoard.AddQuota, KeepFinished: DefaultBoard.KeepFinished, Lease: DefaultBoard.Lease}},
		{BoardConfig{AddQuota: ip(7)}, Board{ClaimLimit: DefaultBoard.ClaimLimit, AddQuota: 7, KeepFinished: DefaultBoard.KeepFinished, Lease: DefaultBoard.Lease}},
		{BoardConfig{KeepFinished: sp("1m")}, Board{ClaimLimit: DefaultBoard.ClaimLimit, AddQuota: DefaultBoard.AddQuota, KeepFinished: time.Minute, Lease: DefaultBoard.Lease}},
		{BoardConfig{KeepFinished: sp("8760h")}, Board{ClaimLimit: DefaultBoard.ClaimLimit, AddQuota: DefaultBoard.AddQuota, KeepFinished: 365 * 24 * time.Hour, Lease: DefaultBoard.Lease}},
		{BoardConfig{Lease: sp("5s")}, Board{ClaimLimit: DefaultBoard.ClaimLimit, AddQuota: DefaultBoard.AddQuota, KeepFinished: DefaultBoard.KeepFinished, Lease: 5 * time.Second}},
		{BoardConfig{Lease: sp("10m")}, Board{ClaimLimit: DefaultBoard.ClaimLimit, AddQuota: DefaultBoard.AddQuota, KeepFinished: DefaultBoard.KeepFinished, Lease: 10 * time.Minute}},
	} {
		m, err := with(func(c *Config) { c.Board = tc.cfg }).Validate()
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if m.Board != tc.want {
			t.Errorf("%+v: board %+v, want %+v", tc.cfg, m.Board, tc.want)
		}
	}
}

// flock:bus.replicas defaults to a three-node cluster on aws and one node on
// docker; an explicit value wins on either target.
func TestReplicasDefaultByTarget(t *testing.T) {
	for _, c := range []struct {
		target string
		set    *int
		want   int
	}{
		{"docker", nil, 1},
		{"aws", nil, DefaultAWSReplicas},
		{"aws", ip(1), 1},
		{"aws", ip(3), 3},
		{"docker", ip(3), 3},
		{"docker", ip(1), 1},
	} {
		cfg := Config{Target: c.target, AgentCount: ip(2), Bus: BusConfig{Replicas: c.set}}
		m, err := cfg.Validate()
		if err != nil {
			t.Fatalf("%s %v: %v", c.target, c.set, err)
		}
		if m.Bus.Replicas != c.want || m.Bus.Clustered() != (c.want > 1) || len(m.Bus.BusNodes()) != c.want {
			t.Errorf("%s with replicas %v: %d nodes (clustered %v), want %d", c.target, c.set, m.Bus.Replicas, m.Bus.Clustered(), c.want)
		}
	}
	if DefaultAWSReplicas != 3 || DefaultBus.Replicas != 1 {
		t.Errorf("defaults: aws %d, docker %d; want 3 and 1", DefaultAWSReplicas, DefaultBus.Replicas)
	}
}

// An agent's UID, slot and subnet depend on it alone: not on who else is in the flock.
func TestAgentIdentityIsStable(t *testing.T) {
	three, err := base(3).Validate()
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-3"}, {ID: "researcher", Slot: ip(7)}}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	a3, _ := three.Agent("agent-3")
	b3, _ := explicit.Agent("agent-3")
	if a3.IDKey != "flock:agentCount" || b3.IDKey != "flock:agents[0].id" {
		t.Errorf("the keys the IDs come from: %q and %q", a3.IDKey, b3.IDKey)
	}
	a3.IDKey, b3.IDKey = "", "" // where the ID was written is no part of the agent
	if !reflect.DeepEqual(a3, b3) {
		t.Fatalf("agent-3 changed when agents 1 and 2 left and researcher came: %+v vs %+v", a3, b3)
	}
	r, _ := explicit.Agent("researcher")
	if r.UID != 20007 || r.Subnet.String() != "10.210.0.56/29" {
		t.Fatalf("researcher: %+v", r)
	}
}

func TestOverridesApplyToOneAgent(t *testing.T) {
	m, err := with(func(c *Config) {
		c.Limits.MemoryMiB = ip(512)
		c.Overrides = map[string]LimitsConfig{"agent-2": {MemoryMiB: ip(1024), Pids: ip(64)}}
	}).Validate()
	if err != nil {
		t.Fatal(err)
	}
	a1, _ := m.Agent("agent-1")
	a2, _ := m.Agent("agent-2")
	if a1.Limits.MemoryMiB != 512 || a2.Limits.MemoryMiB != 1024 || a2.Limits.Pids != 64 || a2.Limits.CPUs != DefaultLimits.CPUs {
		t.Fatalf("agent-1 %+v agent-2 %+v", a1.Limits, a2.Limits)
	}
}

func TestFiveHundredAgentsFitTheDefaultPool(t *testing.T) {
	m, err := base(500).Validate()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Prefix]bool{}
	for _, a := range m.Agents {
		if seen[a.Subnet] || !m.Network.Pool.Contains(a.Subnet.Addr()) {
			t.Fatalf("%s: subnet %s reused or outside the pool", a.ID, a.Subnet)
		}
		seen[a.Subnet] = true
	}
}

// The agent program: a stack-wide default, an agent's own, or none ([]).
func TestAgentProgram(t *testing.T) {
	c := Config{Target: "docker", Program: []string{"/shared/common/bin/agent", "--fast"}, Agents: []AgentConfig{
		{ID: "agent-1"},
		{ID: "agent-2", Program: []string{"/shared/common/bin/other"}},
		{ID: "agent-3", Program: []string{}},
	}}
	m, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"agent-1": `["/shared/common/bin/agent","--fast"]`,
		"agent-2": `["/shared/common/bin/other"]`,
		"agent-3": "",
	}
	for _, a := range m.Agents {
		if a.Program != want[a.ID] {
			t.Errorf("%s: program %q, want %q", a.ID, a.Program, want[a.ID])
		}
	}
	for _, tc := range []struct {
		cfg       Config
		key, rule string
	}{
		{Config{Target: "docker", AgentCount: ip(1), Program: []string{"bin/agent"}}, "flock:program", "must be an absolute path"},
		{Config{Target: "docker", Agents: []AgentConfig{{ID: "agent-1", Program: []string{"/bin/a", ""}}}}, "flock:agents[0].program[1]", "must be 1 to 4096 bytes"},
	} {
		_, err := tc.cfg.Validate()
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Rule, tc.rule) {
			t.Errorf("%+v: got %v, want %s: %s", tc.cfg, err, tc.key, tc.rule)
		}
	}
}

// An agent's labels (flock:agents[i].labels) are read as given, in order;
// an agent without any, and every agent of flock:agentCount, has none.
func TestAgentLabels(t *testing.T) {
	m, err := Config{Target: "docker", Agents: []AgentConfig{
		{ID: "agent-1", Labels: []string{"go", "review", "gpu-large", "lang_go"}},
		{ID: "agent-2"},
		{ID: "agent-3", Labels: []string{}},
		{ID: "researcher", Slot: ip(9), Labels: []string{"web", "0day"}},
	}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"agent-1":    {"go", "review", "gpu-large", "lang_go"},
		"agent-2":    nil,
		"agent-3":    nil,
		"researcher": {"web", "0day"},
	}
	for _, a := range m.Agents {
		if !reflect.DeepEqual(a.Labels, want[a.ID]) {
			t.Errorf("%s: labels %q, want %q", a.ID, a.Labels, want[a.ID])
		}
	}
	most := make([]string, protocol.MaxBoardLabels)
	for i := range most {
		most[i] = fmt.Sprintf("l%d", i)
	}
	most[0] = strings.Repeat("a", protocol.MaxBoardLabel)
	m, err = Config{Target: "aws", Agents: []AgentConfig{{ID: "agent-1", Labels: most}}}.Validate()
	if err != nil {
		t.Fatalf("%d labels, the longest %d bytes: %v", len(most), protocol.MaxBoardLabel, err)
	}
	if !reflect.DeepEqual(m.Agents[0].Labels, most) {
		t.Errorf("labels %q, want %q", m.Agents[0].Labels, most)
	}
	m, err = base(3).Validate()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Agents {
		if a.Labels != nil {
			t.Errorf("%s of flock:agentCount: labels %q, want none", a.ID, a.Labels)
		}
	}
}

// A bad label, too many labels or a repeated one is refused under its key,
// with the rule; every one of them is reported at once, and an agent whose
// ID is refused has its labels checked too.
func TestAgentLabelRules(t *testing.T) {
	tooMany := make([]string, protocol.MaxBoardLabels+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("l%d", i)
	}
	agents := func(labels ...[]string) Config {
		c := Config{Target: "docker"}
		for i, l := range labels {
			c.Agents = append(c.Agents, AgentConfig{ID: fmt.Sprintf("agent-%d", i+1), Labels: l})
		}
		return c
	}
	rule := "must match " + protocol.BoardLabelRule
	for _, tc := range []struct {
		name      string
		cfg       Config
		key, rule string
	}{
		{"upper case", agents(nil, nil, []string{"go", "Review"}), "flock:agents[2].labels[1]", rule + ` (got "Review")`},
		{"empty", agents([]string{""}), "flock:agents[0].labels[0]", rule + ` (got "")`},
		{"leading dash", agents([]string{"-go"}), "flock:agents[0].labels[0]", rule},
		{"dot", agents([]string{"go.lang"}), "flock:agents[0].labels[0]", rule},
		{"wildcard", agents([]string{"*"}), "flock:agents[0].labels[0]", rule},
		{"space", agents([]string{"go lang"}), "flock:agents[0].labels[0]", rule},
		{"too long", agents([]string{strings.Repeat("a", protocol.MaxBoardLabel+1)}), "flock:agents[0].labels[0]", rule},
		{"too many", agents(nil, tooMany), "flock:agents[1].labels", fmt.Sprintf("at most %d labels per agent (got %d)", protocol.MaxBoardLabels, protocol.MaxBoardLabels+1)},
		{"duplicate", agents([]string{"go", "review", "go"}), "flock:agents[0].labels[2]", `duplicates flock:agents[0].labels[0]: an agent's labels must be unique (got "go")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Validate()
			ps := protocol.Problems(err)
			var fe *Error
			if len(ps) != 1 || !errors.As(ps[0], &fe) || fe.Key != tc.key || !strings.Contains(fe.Rule, tc.rule) {
				t.Fatalf("want one problem, %s: …%s…\n got: %v", tc.key, tc.rule, err)
			}
		})
	}

	c := agents([]string{"Go", "ok", "ok"}, tooMany, []string{"fine"})
	c.Agents = append(c.Agents, AgentConfig{ID: "Bad_ID", Slot: ip(9), Labels: []string{"x.y"}})
	_, err := c.Validate()
	var got []string
	for _, e := range protocol.Problems(err) {
		got = append(got, e.Error())
	}
	want := []string{
		`flock:agents[0].labels[0]: ` + rule + ` (got "Go")`,
		`flock:agents[0].labels[2]: duplicates flock:agents[0].labels[1]: an agent's labels must be unique (got "ok")`,
		fmt.Sprintf("flock:agents[1].labels: at most %d labels per agent (got %d)", protocol.MaxBoardLabels, protocol.MaxBoardLabels+1),
		`flock:agents[3].id: ` + (&protocol.AgentIDError{ID: "Bad_ID"}).Error(),
		`flock:agents[3].labels[0]: ` + rule + ` (got "x.y")`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n %s\nwant:\n %s", strings.Join(got, "\n "), strings.Join(want, "\n "))
	}
	if !strings.Contains(err.Error(), `flock:agents[0].labels[0]: `+rule) {
		t.Errorf("the joined error does not say the rule: %v", err)
	}
}
