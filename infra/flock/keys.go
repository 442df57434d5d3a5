package flock

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// ConfigKey is one row of the configuration reference (docs/configuration.md,
// generated from the rows: go test ./tests/stacks -run TestConfigurationDoc
// -update). Defaults are read from the Default… values validation applies,
// and the ranges of the numbers and durations are the ones it checks
// (the range… values below), so the reference cannot drift from them.
type ConfigKey struct {
	Key         string // full key, e.g. "flock:limits.cpus"
	Type        string
	Default     string
	Rule        string
	Targets     string // which stacks read it: "both", "docker" or "aws"
	Description string
}

// Targets of a key.
const (
	BothTargets = "both"
	DockerOnly  = "docker"
	AWSOnly     = "aws"
)

// intRange is what an integer key may hold.
type intRange struct {
	lo, hi int
	unit   string
}

func (r intRange) rule() string { return fmt.Sprintf("%d to %d %s", r.lo, r.hi, r.unit) }

// check sets *dst to *v if v is set and in range, or says why not under key.
func (r intRange) check(es *errs, key string, v *int, dst *int) {
	intIn(es, key, v, r.lo, r.hi, r.unit, dst)
}

// durationRange is what a duration key may hold.
type durationRange struct{ lo, hi time.Duration }

func (r durationRange) rule() string {
	return fmt.Sprintf("a Go duration from %s to %s", r.lo, r.hi)
}

func (r durationRange) check(es *errs, key string, v *string, dst *time.Duration) {
	durationIn(es, key, v, r.lo, r.hi, dst)
}

// The ranges validation checks, and the reference states.
var (
	rangeMemoryMiB    = intRange{32, 1 << 20, "MiB"}
	rangePids         = intRange{16, 1 << 16, "processes"}
	rangeTmpfsMiB     = intRange{1, 1 << 14, "MiB"}
	rangeConcurrency  = intRange{1, 64, "tasks"}
	rangeDiskMiB      = intRange{MinDiskMiB, 1 << 20, "MiB"}
	rangeTaskTimeout  = durationRange{time.Second, 24 * time.Hour}
	rangeHeartbeat    = durationRange{time.Second, time.Hour}
	rangeAckWait      = durationRange{time.Second, time.Hour}
	rangeStreamMaxAge = durationRange{time.Minute, 365 * 24 * time.Hour}
	rangeMaxDeliver   = intRange{1, 100, "deliveries"}
	rangeMaxPayload   = intRange{1, 64 << 10, "KiB"}
	rangeStreamMiB    = intRange{1, 1 << 20, "MiB"}
	rangeJetStreamMiB = intRange{16, 1 << 22, "MiB"}
	rangeResultsMiB   = intRange{1, 1 << 20, "MiB"}
	rangeConnections  = intRange{2, 1024, "connections"}
	rangeClaimLimit   = intRange{1, 100, "tasks"}
	rangeAddQuota     = intRange{0, 10000, "tasks"}
	rangeKeepFinished = durationRange{time.Minute, 365 * 24 * time.Hour}
	rangeLease        = durationRange{5 * time.Second, 10 * time.Minute}
	rangeAuditKeep    = durationRange{time.Hour, 10 * 365 * 24 * time.Hour}
	rangeAuditMiB     = intRange{16, 1 << 20, "MiB"}
)

func itoa(n int) string { return strconv.Itoa(n) }

// ModelKeys are the keys infra/flock reads: the flock model, both targets.
func ModelKeys() []ConfigKey {
	l, b := DefaultLimits, DefaultBus
	limits := func(prefix string, d Limits, agent bool) []ConfigKey {
		rows := []ConfigKey{
			{prefix + ".cpus", "number (cores)", strconv.FormatFloat(d.CPUs, 'f', -1, 64), "more than 0, at most 64, and a value the docker provider reads back unchanged", BothTargets, "CPU quota"},
			{prefix + ".memoryMiB", "integer", itoa(d.MemoryMiB), rangeMemoryMiB.rule(), BothTargets, "memory limit; no swap"},
			{prefix + ".pids", "integer", itoa(d.Pids), rangePids.rule(), BothTargets, "process and thread limit"},
			{prefix + ".tmpfsMiB", "integer", itoa(d.TmpfsMiB), rangeTmpfsMiB.rule() + "; twice it must fit in memoryMiB", BothTargets, "size of each of /tmp and /run"},
			{prefix + ".taskTimeout", "duration", d.TaskTimeout.String(), rangeTaskTimeout.rule(), BothTargets, "default timeout of one task"},
			{prefix + ".concurrency", "integer", itoa(d.Concurrency), rangeConcurrency.rule(), BothTargets, "tasks run at once"},
		}
		if agent {
			rows = append(rows, ConfigKey{prefix + ".diskMiB", "integer", itoa(d.DiskMiB), rangeDiskMiB.rule(), DockerOnly, "size of the filesystem holding the agent's own directory"})
		}
		return rows
	}
	rows := []ConfigKey{
		{"flock:target", "string", "(required)", fmt.Sprintf("%q or %q", TargetDocker, TargetAWS), BothTargets, "where the flock runs: a Docker engine or ECS Fargate"},
		{"flock:name", "string", DefaultName, "matches " + namePattern.String(), BothTargets, "prefix of every resource and container name"},
		{"flock:agentCount", "integer", "(this or flock:agents)", fmt.Sprintf("1 to %d, and fewer than the per-agent subnets of flock:network.pool", MaxAgents), BothTargets, "agents agent-1 … agent-N"},
		{"flock:agents", "list of {id, slot, limits, program, gateway, image, labels}", "", fmt.Sprintf("at most %d; IDs unique, not reserved (%s) nor bus-<n>; slot required unless the ID is agent-N", MaxAgents, reservedList()), BothTargets, "the agents by name; gateway and image override the stack's for that agent"},
		{"flock:agents[i].labels", "list of strings", "(none)", fmt.Sprintf("at most %d, each matching %s, no duplicates", protocol.MaxBoardLabels, protocol.BoardLabelRule), BothTargets, "what the board lets the agent claim: a task's labels must all be among them; the agents of flock:agentCount have none"},
		{"flock:overrides", "map of agent ID to limits", "", "every ID names an agent of the flock", BothTargets, "limits of one agent of a counted flock"},
	}
	rows = append(rows, limits("flock:limits", l, true)...)
	rows = append(rows,
		ConfigKey{"flock:uidBase", "integer", itoa(DefaultUIDBase), fmt.Sprintf("1000 to %d (at least 1001 on aws)", maxUIDBase), BothTargets, "agent UID/GID = uidBase + slot; the bus runs as uidBase"},
		ConfigKey{"flock:shared.root", "path", DefaultShared.Root, "a clean absolute path, no system directory", DockerOnly, "host directory of the agents' directories, common and logs"},
		ConfigKey{"flock:shared.stateRoot", "path", DefaultShared.StateRoot, "a clean absolute path, no system directory, not overlapping flock:shared.root", DockerOnly, "host directory of credentials, disks and the bus's store"},
		ConfigKey{"flock:network.pool", "IPv4 CIDR", DefaultNetwork.Pool.String(), "a private (RFC 1918) network address", DockerOnly, "pool of the per-agent subnets; slot 0 is the bus network"},
		ConfigKey{"flock:network.prefixLength", "integer", itoa(DefaultNetwork.PrefixLength), "24 to 29, longer than the pool's", DockerOnly, "size of each agent's subnet"},
		ConfigKey{"flock:bus.heartbeatInterval", "duration", b.Heartbeat.String(), rangeHeartbeat.rule(), BothTargets, "how often agents report their status"},
		ConfigKey{"flock:bus.ackWait", "duration", b.AckWait.String(), rangeAckWait.rule(), BothTargets, "how long a delivered task waits for its ack"},
		ConfigKey{"flock:bus.maxDeliver", "integer", itoa(b.MaxDeliver), rangeMaxDeliver.rule(), BothTargets, "deliveries of a task before it is dead-lettered"},
		ConfigKey{"flock:bus.maxPayloadKiB", "integer", itoa(b.MaxPayloadBytes >> 10), rangeMaxPayload.rule() + ", at most flock:bus.streamMaxMiB", BothTargets, "largest message"},
		ConfigKey{"flock:bus.streamMaxAge", "duration", b.StreamMaxAge.String(), rangeStreamMaxAge.rule(), BothTargets, "age past which stream messages are dropped"},
		ConfigKey{"flock:bus.streamMaxMiB", "integer", itoa(int(b.StreamMaxBytes >> 20)), rangeStreamMiB.rule() + "; two such streams must fit in flock:bus.jetStreamMaxMiB", BothTargets, "size of the task and of the dead-letter stream"},
		ConfigKey{"flock:bus.jetStreamMaxMiB", "integer", itoa(int(b.JetStreamMaxBytes >> 20)), rangeJetStreamMiB.rule() + "; must leave each agent room for 4 of the largest messages", BothTargets, "the bus's whole store"},
		ConfigKey{"flock:bus.resultsMiBPerAgent", "integer", fmt.Sprintf("(what the store leaves, shared out equally, at most %d)", DefaultResultsPerAgent>>20), rangeResultsMiB.rule() + "; all of them must fit in the store", BothTargets, "size of each agent's results stream"},
		ConfigKey{"flock:bus.peerKiBps", "integer", itoa(int(b.PeerBytesPerSecond >> 10)), fmt.Sprintf("0 (no limit) or 64 to %d KiB/s", 1<<22), BothTargets, "what the bus reads from any one network peer"},
		ConfigKey{"flock:bus.connectionsPerPeer", "integer", itoa(b.ConnectionsPerPeer), rangeConnections.rule(), BothTargets, "client connections one peer address may hold open"},
		ConfigKey{"flock:bus.replicas", "integer", fmt.Sprintf("%d on aws, %d on docker", DefaultAWSReplicas, b.Replicas), "1 or 3", BothTargets, "bus nodes, and copies of every stream"},
	)
	rows = append(rows, limits("flock:bus.limits", b.Limits, false)...)
	rows = append(rows,
		ConfigKey{"flock:board.claimLimit", "integer", itoa(DefaultBoard.ClaimLimit), rangeClaimLimit.rule(), BothTargets, "tasks an agent may hold (claimed) on the board at once"},
		ConfigKey{"flock:board.addQuota", "integer", itoa(DefaultBoard.AddQuota), rangeAddQuota.rule(), BothTargets, "subtasks an agent may add to the board, all told; 0: none"},
		ConfigKey{"flock:board.lease", "duration", DefaultBoard.Lease.String(), rangeLease.rule(), BothTargets, "how long a claim lasts unrenewed: an agent silent that long (its runtime renews every third of it) loses its claims; a task's timeout bounds the whole claim"},
		ConfigKey{"flock:board.keepFinished", "duration", DefaultBoard.KeepFinished.String(), rangeKeepFinished.rule(), BothTargets, "how long a finished plan (every task done, failed or cancelled) stays on the board after its last change; then the board removes its tasks"},
	)
	rows = append(rows,
		ConfigKey{"flock:audit.retention", "duration", DefaultAudit.Retention.String(), rangeAuditKeep.rule(), BothTargets, "how long the audit trail keeps an entry; older ones are removed, leaving a checkpoint that `flock-agent audit verify` checks"},
		ConfigKey{"flock:audit.maxMiB", "integer", fmt.Sprintf("%d, or less: at most an eighth of flock:bus.jetStreamMaxMiB and what the store leaves after the other streams and each agent's share (at least 1)", DefaultAudit.MaxBytes>>20), rangeAuditMiB.rule() + "; counted in flock:bus.jetStreamMaxMiB", BothTargets, "the audit trail's store; a full trail refuses new entries (logged) rather than drop old ones unchecked"},
	)
	rows = append(rows,
		ConfigKey{"flock:otlp.endpoint", "string", "(none: no spans exported)", "an http:// or https:// URL with a host, no user, password, query or fragment; needs flock:gateway.upstreams", BothTargets, "the OTLP/HTTP endpoint (path /v1/traces unless it names one) the model gateway exports the flock's spans to: the operator's sends, the agents' task runs, the gateway's calls"},
	)
	rows = append(rows,
		ConfigKey{"flock:program", "list of strings", "(none)", "an absolute path in the container, then at most 64 arguments of 1 to 4096 bytes", BothTargets, "the agent program every agent runs beside its tasks (an agent's own program wins)"},
		ConfigKey{"flock:image", "{base} or {dockerfile, context}", "(the stock image)", "not both; paths relative to the project", BothTargets, "every agent's own image"},
		ConfigKey{"flock:gateway.upstreams", "map of name to {url, keyHeader, keyPrefix, keySecret, api, prices}", "(none: no model gateway)", "names match " + upstreamName.String() + "; any upstream but anthropic and openai needs url and api", BothTargets, "the model APIs the model gateway forwards to"},
		ConfigKey{"flock:gateway.budgetTokens", "integer", "0 (no cap)", fmt.Sprintf("0 to %d", int64(MaxBudgetTokens)), BothTargets, "every agent's token budget"},
		ConfigKey{"flock:gateway.budgetWindow", "string", "(never starts over)", "day, month or none", BothTargets, "when budgets start over (00:00 UTC)"},
		ConfigKey{"flock:gateway.allowHosts", "list of host:port", "(none)", "host:port or *.name:port, a name, not an IP", BothTargets, "kept for older stacks: each entry is a blind tunnel rule of flock:gateway.egress, with a preview warning naming the rule to write instead"},
		ConfigKey{EgressKey, "list of {host, port, plainHttp, methods, paths, agents, credential, upgrade, tunnel, privateRanges, roots, requestsPerMinute, budget, maxRequestBytes, maxResponseBytes} or {preset, agents, credential, and the limits}", "(none: no way out)", "docs/egress.md; a name or *.name that is not a public suffix; credentials name a secret config key; at most 256 rules; on aws no privateRanges over flock:aws.cidr", BothTargets, "the hosts agents may reach through the gateway, with the methods and paths allowed and the credential it puts in"},
	)
	rows = append(rows, limits("flock:gateway.limits", DefaultModelGatewayLimits, false)...)
	rows = append(rows, limits("flock:services.limits", DefaultServicesLimits, false)...)
	rows = append(rows,
		ConfigKey{"flock:runtime", "string", "(the engine's)", "empty, runc or runsc; empty on aws", DockerOnly, "OCI runtime of the agent containers"},
	)
	return rows
}

func reservedList() string {
	var ids []string
	for id := range reservedIDs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// ConfigReference is docs/configuration.md: a markdown table of keys.
func ConfigReference(keys []ConfigKey) string {
	var b strings.Builder
	b.WriteString("<!-- Generated from the configuration key table (infra/flock/keys.go and the targets' ConfigKeys): do not edit.\n")
	b.WriteString("     Regenerate with: go test ./tests/stacks -run TestConfigurationDoc -update -->\n\n")
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Every key of `Pulumi.<stack>.yaml` the program reads. Bad input fails `pulumi preview` with one line per\n")
	b.WriteString("problem naming the key and the rule, and declares nothing. *Targets*: the stacks that read the key\n")
	b.WriteString("(`docker`: the dev stack, `aws`: ECS Fargate, `both`).\n\n")
	b.WriteString("| key | type | default | rule | targets | description |\n|---|---|---|---|---|---|\n")
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
	for _, k := range keys {
		def := k.Default
		if def != "" && !strings.HasPrefix(def, "(") {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.Key, cell(k.Type), cell(def), cell(k.Rule), k.Targets, cell(k.Description))
	}
	b.WriteString(referenceNotes)
	return b.String()
}

// referenceNotes close the reference: what the table cannot say.
const referenceNotes = `
Unknown keys inside an object (a typo such as ` + "`memoryMb`" + `) are errors too. Secrets
(` + "`flock:busSecret`" + `, the model gateway's upstream keys) must be set with
` + "`pulumi config set --secret`" + `: a plain-text value is refused.

## Stack outputs

` + "`busUrl`" + ` (with a clustered bus, every node's URL, comma-separated: NATS clients take the list
and fail over), ` + "`monitorUrl`" + ` (the first node's), ` + "`agents`" + ` (id, slot, uid, gid, dir, logFile,
subnet), ` + "`sharedRoot`" + `, and ` + "`operatorSeed`" + ` (a secret:
` + "`pulumi stack output operatorSeed --show-secrets`" + `, or ` + "`make operator-key`" + `).
`
