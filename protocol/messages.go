package protocol

import (
	"bytes"
	"encoding/json"
	"time"
)

// Version is the version of every message body this package defines. A body
// with a higher "v" is refused with an error result; a body without "v" is
// read as version 1. Unknown fields are ignored, so adding a field is not a
// new version; changing the meaning of one is.
const Version = 1

// Task kinds.
const (
	KindEcho = "echo" // built in: no process, no files; stdout is stdin (or the args joined by spaces)
	KindExec = "exec" // runs Command with Args in the task directory
)

// Kinds lists the task kinds this agent runs.
var Kinds = []string{KindEcho, KindExec}

// Result statuses.
const (
	StatusOK       = "ok"       // ran and exited 0
	StatusFailed   = "failed"   // ran and exited non-zero (or was killed by a signal)
	StatusTimeout  = "timeout"  // killed after its timeout
	StatusRejected = "rejected" // never ran: the body was malformed, oversized or invalid (Error says what)
	StatusError    = "error"    // the agent could not run it (Error says why)
)

// Limits of a task body that do not depend on the agent's configuration.
const (
	MaxTaskTimeout = 24 * time.Hour
	MaxTaskFiles   = 64
	MaxArgs        = 1024
	MaxEnv         = 256
)

// Header names the bus sets on a parked (dead-letter) task.
const (
	HeaderDeadReason      = "Flock-Dead-Reason"
	HeaderDeadConsumer    = "Flock-Dead-Consumer"
	HeaderDeadDeliveries  = "Flock-Dead-Deliveries"
	HeaderOriginalStream  = "Flock-Original-Stream"
	HeaderOriginalSubject = "Flock-Original-Subject"
	HeaderOriginalSeq     = "Flock-Original-Seq"
	HeaderOriginalTime    = "Flock-Original-Time"
)

// Task is the body of a message on tasks.<id>, tasks.pool or tasks.all.
//
//	{"v":1,"id":"t-42","kind":"exec","command":"/flock-agent","args":["tool","sleep","1"],
//	 "stdin":"...","env":{"MODE":"fast"},"dir":"work","files":{"in/a.txt":"hello"},"timeout":"30s"}
type Task struct {
	V       int               `json:"v"`
	ID      string            `json:"id"`                // names the task directory: [A-Za-z0-9][A-Za-z0-9._-]{0,127}
	Kind    string            `json:"kind,omitempty"`    // echo | exec; empty means exec when Command is set
	Command string            `json:"command,omitempty"` // exec: absolute path, a path relative to the work dir, or a name looked up in PATH
	Args    []string          `json:"args,omitempty"`
	Stdin   string            `json:"stdin,omitempty"`
	Env     map[string]string `json:"env,omitempty"`   // added to the allow-listed environment; names FLOCK_* are reserved
	Dir     string            `json:"dir,omitempty"`   // working directory, relative to the task directory
	Files   map[string]string `json:"files,omitempty"` // files written into the task directory before the run
	Timeout Duration          `json:"timeout,omitempty"`
	// MaxOutputBytes lowers (never raises) the agent's cap on stdout and stderr.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// Nonce is a secret the operator puts in each task. Only an agent the bus
	// delivered the task to learns it, and its result echoes it: a result
	// without it (an agent claiming a task it never received) is forged.
	Nonce string `json:"nonce,omitempty"`
}

// Result is the body an agent publishes on task.result.<agent-id> for every
// task delivery it finishes, including the ones it refused.
type Result struct {
	V       int    `json:"v"`
	TaskID  string `json:"task_id,omitempty"` // empty when the body could not be read
	Agent   string `json:"agent"`
	Kind    string `json:"kind,omitempty"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"` // what was wrong, for rejected and error
	Subject string `json:"subject"`         // the task's subject: tasks.<id>, tasks.pool or tasks.all
	Seq     uint64 `json:"seq"`             // the task's sequence in FLOCK_TASKS: correlates even an unreadable body
	Nonce   string `json:"nonce,omitempty"` // the task's nonce: proves the agent was given the task
	Attempt int    `json:"attempt"`         // delivery count, 1 on the first run

	ExitCode    *int   `json:"exit_code,omitempty"`
	Signal      string `json:"signal,omitempty"`
	Stdout      string `json:"stdout,omitempty"` // the first bytes (see Truncated); the whole capped output is in Dir
	Stderr      string `json:"stderr,omitempty"`
	StdoutBytes int64  `json:"stdout_bytes,omitempty"` // bytes the task wrote, kept or not
	StderrBytes int64  `json:"stderr_bytes,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"` // inline output or the files were cut at their cap
	Dir         string `json:"dir,omitempty"`       // the task directory inside the agent (result files live there)

	// Trace is the W3C trace ID the task ran in (from the task message's
	// traceparent header), for finding its spans and the gateway's calls.
	Trace string `json:"trace,omitempty"`
	// Span is the task's span as its agent ran it, ParentSpan the
	// operator's send span it is a child of (16 hex each).
	Span       string    `json:"span,omitempty"`
	ParentSpan string    `json:"parent_span,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	DurationMS float64   `json:"duration_ms"`
}

// OK reports whether the task ran and succeeded.
func (r Result) OK() bool { return r.Status == StatusOK }

// Agent states reported in heartbeats.
const (
	StateStarting = "starting" // connecting to the bus, binding its consumers
	StateReady    = "ready"    // taking tasks
	StateDraining = "draining" // SIGTERM: finishing in-flight tasks, taking no new ones
	StateStopped  = "stopped"  // last heartbeat before exit
)

// Heartbeat is the body an agent publishes on agent.<id>.heartbeat.
type Heartbeat struct {
	V           int       `json:"v"`
	Agent       string    `json:"agent"`
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	State       string    `json:"state"`
	UptimeMS    int64     `json:"uptime_ms"`
	IntervalMS  int64     `json:"interval_ms"` // when to expect the next one
	Running     int       `json:"running"`
	Completed   uint64    `json:"completed"` // results published since start
	Failed      uint64    `json:"failed"`    // of which not ok
	Concurrency int       `json:"concurrency"`
	Version     string    `json:"version,omitempty"`
	// Reconnects counts the times the bus connection came back since the
	// agent started: a flapping bus shows here (and in disconnected and
	// reconnected events), never in the agent's health.
	Reconnects uint64 `json:"reconnects,omitempty"`
	// Board is the board task the agent holds and runs now ("<plan>.<task>",
	// protocol.BoardKey), if any.
	Board string `json:"board,omitempty"`
	// Tasks are the tasks it runs now (echo tasks, done at once, are left
	// out), oldest first.
	Tasks []RunningTask `json:"tasks,omitempty"`
}

// Event types an agent publishes on agent.<id>.events.
const (
	EventStarted      = "started"     // connected to the bus
	EventReady        = "ready"       // bound its consumers, taking tasks
	EventReconnected  = "reconnected" // the bus connection came back (Detail: how long it was away, and why)
	EventInbox        = "inbox"       // an inbox message was stored (Ref: message ID, Detail: file)
	EventBroadcast    = "broadcast"   // a broadcast was stored (Ref: message ID, Detail: file)
	EventTaskRejected = "task.rejected"
	// The agent program (AGENT_PROGRAM): started (Ref: its PID), and exited
	// (Detail: how, and when it is started again).
	EventProgramStarted = "program.started"
	EventProgramExited  = "program.exited"
	EventDraining       = "draining"
	EventStopped        = "stopped"
	// A run task of the board's (Ref: "<plan>.<task>", protocol.BoardKey):
	// claimed (Detail: the attempt, the task directory, the command), done,
	// failed (Detail: why), released (handed back to the board: Detail: why).
	EventBoardClaimed  = "board.claimed"
	EventBoardDone     = "board.done"
	EventBoardFailed   = "board.failed"
	EventBoardReleased = "board.released"
)

// Event is the body an agent publishes on agent.<id>.events.
type Event struct {
	V      int       `json:"v"`
	Agent  string    `json:"agent"`
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Ref    string    `json:"ref,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Message is the body of an inbox message (agent.<to>.inbox.<from>) or a
// broadcast. From is filled in by the receiver from the subject (the bus
// vouches for it); what a sender puts there is ignored.
type Message struct {
	V    int             `json:"v"`
	ID   string          `json:"id"`
	From string          `json:"from,omitempty"`
	Time time.Time       `json:"time"`
	Body string          `json:"body,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Receipt says what became of an inbox message: Status queued (the bus
// keeps it in the agent's mailbox, stream sequence Seq) or delivered (the
// agent stored it in File, relative to its directory); Error says why the
// message was refused. A broadcast's receipts are all delivered or refused
// (a broadcast does not wait).
type Receipt struct {
	V      int    `json:"v"`
	ID     string `json:"id"`   // the message ID
	To     string `json:"to"`   // the receiving agent
	From   string `json:"from"` // the sender, as the bus vouched for it
	Status string `json:"status,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	File   string `json:"file,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Roster is the bus's answer on flock.roster: the IDs of the flock's agents,
// sorted. It is all an agent learns about its peers from the bus.
type Roster struct {
	V      int      `json:"v"`
	Agents []string `json:"agents"`
}

// Encode writes v as JSON without HTML escaping, indented when indent is
// set. encoding/json's default writes each of <, > and & as a six-byte
// \u escape: a body of "<" characters would be stored and sent at six times
// its size.
func Encode(v any, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
