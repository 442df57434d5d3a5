package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// The audit trail: one JSON entry per thing done on the bus (a task sent or
// answered, a message, a board change, a gateway call, an operator's
// request), written by one writer in flock-services from what crosses the
// bus (who comes from the subject the bus let them publish on, never from a
// body), into AuditStream. Each entry carries the SHA-256 of the one before
// it; the writer anchors the chain's head in AuditAnchorsBucket and in its
// own log from time to time, and before retention removes old entries it
// leaves a checkpoint there, so that `flock-agent audit verify` tells an
// edited, deleted or truncated entry from one that retention removed.

const (
	AuditStream  = "FLOCK_AUDIT"
	AuditSubject = "audit.entry" // the only subject of AuditStream; only the services publish on it

	// AuditAnchorsBucket holds AuditHeadKey (the last anchored head),
	// AuditCheckpointKey (the last entry retention removed),
	// AuditUnrecordedKey (the running count of entries not recorded) and
	// AuditSharesKey (what each sender has left of its share).
	AuditAnchorsBucket = "FLOCK_AUDIT_ANCHORS"
	AuditAnchorsStream = "KV_" + AuditAnchorsBucket
	AuditHeadKey       = "head"
	AuditCheckpointKey = "checkpoint"
	AuditUnrecordedKey = "unrecorded"
	AuditSharesKey     = "shares"

	// AuditRetentionMeta is the stream's metadata key that tells the writer
	// how long entries are kept (a Go duration; the topology sets it from
	// flock:audit.retention).
	AuditRetentionMeta = "flock.audit.retention"

	// DefaultAuditRetention keeps entries 90 days.
	DefaultAuditRetention = 90 * 24 * time.Hour
	// AuditAnchorEvery is how often the writer anchors a head that moved.
	AuditAnchorEvery = 30 * time.Second
	// DefaultAuditBytes bounds the stream unless flock:audit.maxMiB says
	// otherwise (DiscardNew: a full trail refuses entries, which the writer
	// logs, rather than drop old ones without a checkpoint).
	DefaultAuditBytes = 256 << 20
	// AuditAnchorsBytes bounds the anchors' bucket: four keys, a few
	// revisions each; AuditAnchorsValueBytes one value (the shares of a
	// flock of 500 agents, two per agent, fit).
	AuditAnchorsBytes      = 1 << 20
	AuditAnchorsValueBytes = 64 << 10

	// MaxAuditEntry bounds one entry's line, whatever crossed the bus:
	// every field is an ID, a name, a status or a number the protocol's
	// rules bound (a field breaking its rule is kept as its length), far
	// under the stream's 64 KiB message, so that many entries fit in one
	// message and none can fail to fit.
	MaxAuditEntry = 1 << 10
)

// Audit entry kinds.
const (
	AuditTaskSent      = "task.sent"       // the operator sent a task (Agent: its agent, "all" or "pool")
	AuditTaskAssigned  = "task.assigned"   // the bus gave a pool task to an agent
	AuditTaskResult    = "task.result"     // an agent answered a task
	AuditMessage       = "message"         // an agent or the operator wrote to an agent's inbox
	AuditBroadcast     = "broadcast"       // the operator's announcement
	AuditBoardChange   = "board.change"    // a board task changed (Outcome: its status)
	AuditBoardRequest  = "board.operator"  // the operator asked the board (What: the request)
	AuditGatewayCall   = "gateway.call"    // the gateway forwarded a call (Outcome: HTTP status)
	AuditEgress        = "gateway.egress"  // an egress connection ended (What: the host:port asked for; Outcome: its kind; Requests, Refused, Sent, Received)
	AuditBudgetChange  = "budget.change"   // an agent's ledger entry was started over or its budget changed
	AuditWriterStarted = "audit.started"   // the writer (re)started: what crossed the bus before it was not seen (Total: carried over)
	AuditMissed        = "audit.missed"    // the writer lost entries (What: why; Count: how many, 0 when not known; Agent: whose, when known)
	AuditOverShare     = "audit.overshare" // entries of a sender over its share of the trail, counted and not recorded (What: the share; Count)
	AuditUnwritten     = "audit.unwritten" // an entry that could not be written (Who, Agent: its; What: its kind; Outcome: why)
)

// AuditKinds are the kinds an entry may have, for the CLI's --kind.
var AuditKinds = []string{AuditTaskSent, AuditTaskAssigned, AuditTaskResult, AuditMessage, AuditBroadcast,
	AuditBoardChange, AuditBoardRequest, AuditGatewayCall, AuditEgress, AuditBudgetChange, AuditWriterStarted, AuditMissed,
	AuditOverShare, AuditUnwritten}

// The causes an audit.missed entry names (its What).
const (
	AuditMissedQueue   = "queue full"    // the writer's queue (bounded in bytes) had no room for the sender
	AuditMissedDropped = "dropped"       // the bus client dropped messages over a subscription's pending limits (a slow consumer)
	AuditMissedRefused = "refused"       // the trail refused the entries (full, or its message limit)
	AuditMissedFailed  = "not written"   // appending failed after the writer's tries
	AuditMissedLink    = "bus link lost" // the writer's connection to the bus went down: what crossed meanwhile is not known (Count 0)
)

// AuditEntry is one line of the trail. It never holds a body or a secret:
// IDs, names, statuses and counts only.
type AuditEntry struct {
	Seq     uint64    `json:"seq"`               // its sequence in AuditStream
	Time    time.Time `json:"time"`              // when the writer saw it
	Who     string    `json:"who"`               // the bus user that did it: an agent's ID, "operator", "gateway", "bus", "board"
	Kind    string    `json:"kind"`              // one of AuditKinds
	Agent   string    `json:"agent,omitempty"`   // the agent it concerns, when not Who
	What    string    `json:"what,omitempty"`    // a task ID, a board task, an upstream, a request
	Outcome string    `json:"outcome,omitempty"` // a status, an HTTP status
	Tokens  int64     `json:"tokens,omitempty"`  // a gateway call's charge
	Trace   string    `json:"trace,omitempty"`   // the W3C trace ID a task, result or gateway call carried
	// An egress connection's counts (gateway.egress): its requests, those
	// refused, and its bytes each way.
	Requests int64 `json:"requests,omitempty"`
	Refused  int64 `json:"refused,omitempty"`
	Sent     int64 `json:"sent,omitempty"`
	Received int64 `json:"received,omitempty"`
	// Refusal is its first refused request, "METHOD /path" (no query), for
	// the operator to review (flock-agent egress --suggest).
	Refusal string `json:"refusal,omitempty"`
	// Count and Total are the writer's own: how many entries this
	// audit.missed, audit.overshare or audit.unwritten entry is about, and
	// how many entries the trail has not recorded since it began, this
	// one's included (carried across the writer's restarts by
	// AuditUnrecordedKey; an audit.started entry carries it too), so that
	// a record lost with what it counted still shows as a jump.
	Count int64  `json:"count,omitempty"`
	Total int64  `json:"total,omitempty"`
	Prev  string `json:"prev"` // the SHA-256 (hex) of the entry before it; "" for the first ever
	Hash  string `json:"hash"` // the SHA-256 (hex) of this entry with Hash empty
}

// Sum is the entry's hash: SHA-256 over its JSON with Hash empty.
func (e AuditEntry) Sum() string {
	e.Hash = ""
	b, _ := json.Marshal(e) // a struct of strings, numbers and a time: cannot fail
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Seal sets the entry's hash and returns its line (its JSON), marshalling
// it once: the JSON with Hash empty ends with "hash":""} (the last field),
// and the line is that with the hash put in.
func (e *AuditEntry) Seal() []byte {
	e.Hash = ""
	b, _ := json.Marshal(e)
	h := sha256.Sum256(b)
	e.Hash = hex.EncodeToString(h[:])
	line := make([]byte, 0, len(b)+len(e.Hash))
	line = append(line, b[:len(b)-2]...) // up to "hash":"
	line = append(line, e.Hash...)
	return append(line, '"', '}')
}

// AuditAnchor is a head or a checkpoint: an entry's sequence and hash.
type AuditAnchor struct {
	Seq  uint64    `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time"` // the entry's time
}

// AuditUnrecorded is AuditUnrecordedKey: how many entries the trail has
// not recorded since it began, as the writer counted them (the next
// audit.missed, audit.overshare or audit.started entry says so in the
// trail; until then `audit verify` reports the difference).
type AuditUnrecorded struct {
	Total int64     `json:"total"`
	Time  time.Time `json:"time"`
}

// AuditShares is AuditSharesKey: the bytes each sender had left of its
// share of the trail at Time (a sender not named had its whole share).
type AuditShares struct {
	Time time.Time        `json:"time"`
	Left map[string]int64 `json:"left"`
}
