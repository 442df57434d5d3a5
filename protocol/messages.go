package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// Receipt is the receiving agent's answer to an inbox message sent as a
// request: the message is stored in File (relative to the agent's directory),
// or Error says why it is not.
type Receipt struct {
	V     int    `json:"v"`
	ID    string `json:"id"`   // the message ID
	To    string `json:"to"`   // the receiving agent
	From  string `json:"from"` // the sender, as the bus vouched for it
	File  string `json:"file,omitempty"`
	Error string `json:"error,omitempty"`
}

// Roster is the bus's answer on flock.roster: the IDs of the flock's agents,
// sorted. It is all an agent learns about its peers from the bus.
type Roster struct {
	V      int      `json:"v"`
	Agents []string `json:"agents"`
}

// Duration is a time.Duration that reads "30s", "5m" or a number of seconds
// and writes the string form.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == 0 {
		return []byte(`""`), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "1m30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as \"30s\" (got %q)", s)
		}
		*d = Duration(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\" or a number of seconds (got %s)", b)
	}
	if f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
		return fmt.Errorf("duration %s s out of range", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// FieldError says which part of a task body was wrong and how.
type FieldError struct {
	Field   string // "body", "v", "id", "kind", "dir", "files[a/b]", ...
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// ErrTooLarge is wrapped by the error DecodeTask returns for an oversized body.
var ErrTooLarge = errors.New("body too large")

type tooLarge struct{ FieldError }

func (e *tooLarge) Unwrap() error { return ErrTooLarge }

var (
	taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envNamePat    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ValidTaskID reports whether id can name a task directory.
func ValidTaskID(id string) bool { return taskIDPattern.MatchString(id) }

// DecodeTask reads and validates a task body of at most maxBytes bytes
// (maxBytes <= 0: no limit). On error the returned Task holds whatever could
// be read (often the ID), so the error result can name the task; the error is
// a *FieldError naming the field and the rule it breaks.
func DecodeTask(data []byte, maxBytes int) (Task, error) {
	if maxBytes > 0 && len(data) > maxBytes {
		var t Task
		return t, &tooLarge{FieldError{Field: "body", Problem: fmt.Sprintf("task body is %d bytes, over the %d-byte limit", len(data), maxBytes)}}
	}
	var t Task
	if err := json.Unmarshal(data, &t); err != nil {
		// Salvage the ID if the body is JSON but a field has the wrong type.
		var idOnly struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(data, &idOnly) == nil {
			if s, ok := idOnly.ID.(string); ok && ValidTaskID(s) {
				t = Task{ID: s}
			} else {
				t = Task{}
			}
		} else {
			t = Task{}
		}
		return t, &FieldError{Field: "body", Problem: "malformed JSON: " + jsonProblem(err)}
	}
	return t, t.Validate()
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// Validate checks a decoded task and fills in the defaults (v, kind).
func (t *Task) Validate() error {
	switch {
	case t.V < 0:
		return &FieldError{"v", fmt.Sprintf("must be %d (got %d)", Version, t.V)}
	case t.V == 0:
		t.V = Version
	case t.V > Version:
		return &FieldError{"v", fmt.Sprintf("unsupported version %d: this agent reads version %d", t.V, Version)}
	}
	if t.ID == "" {
		return &FieldError{"id", "is required"}
	}
	if !ValidTaskID(t.ID) {
		return &FieldError{"id", fmt.Sprintf("must match %s: it names the task directory (got %q)", taskIDPattern, clip(t.ID))}
	}
	if len(t.Nonce) > 128 {
		return &FieldError{"nonce", fmt.Sprintf("at most 128 bytes (got %d)", len(t.Nonce))}
	}
	if t.Kind == "" {
		if t.Command == "" {
			return &FieldError{"kind", fmt.Sprintf("is required (one of %s)", strings.Join(Kinds, ", "))}
		}
		t.Kind = KindExec
	}
	switch t.Kind {
	case KindEcho:
	case KindExec:
		if t.Command == "" {
			return &FieldError{"command", "is required for kind exec"}
		}
		if err := checkCommand(t.Command); err != nil {
			return err
		}
	default:
		return &FieldError{"kind", fmt.Sprintf("unknown kind %q (this agent runs: %s)", clip(t.Kind), strings.Join(Kinds, ", "))}
	}
	if len(t.Args) > MaxArgs {
		return &FieldError{"args", fmt.Sprintf("at most %d arguments (got %d)", MaxArgs, len(t.Args))}
	}
	for i, a := range t.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return &FieldError{fmt.Sprintf("args[%d]", i), "must not contain a NUL byte"}
		}
	}
	if len(t.Env) > MaxEnv {
		return &FieldError{"env", fmt.Sprintf("at most %d variables (got %d)", MaxEnv, len(t.Env))}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		switch {
		case !envNamePat.MatchString(k):
			return &FieldError{"env", fmt.Sprintf("variable name %q must match %s", clip(k), envNamePat)}
		case strings.HasPrefix(k, "FLOCK_"):
			return &FieldError{"env", fmt.Sprintf("variable %q: names FLOCK_* are set by the agent", k)}
		case strings.IndexByte(t.Env[k], 0) >= 0:
			return &FieldError{"env", fmt.Sprintf("variable %q must not contain a NUL byte", k)}
		}
	}
	if t.Dir != "" {
		if err := CheckRelPath(t.Dir); err != nil {
			return &FieldError{"dir", err.Error()}
		}
	}
	if len(t.Files) > MaxTaskFiles {
		return &FieldError{"files", fmt.Sprintf("at most %d files (got %d)", MaxTaskFiles, len(t.Files))}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Files)) {
		if err := CheckRelPath(name); err != nil {
			return &FieldError{fmt.Sprintf("files[%s]", clip(name)), err.Error()}
		}
	}
	if t.Timeout < 0 || time.Duration(t.Timeout) > MaxTaskTimeout {
		return &FieldError{"timeout", fmt.Sprintf("must be between 0 (the agent's default) and %s (got %s)", MaxTaskTimeout, time.Duration(t.Timeout))}
	}
	if t.MaxOutputBytes < 0 {
		return &FieldError{"max_output_bytes", fmt.Sprintf("must not be negative (got %d)", t.MaxOutputBytes)}
	}
	return nil
}

// checkCommand accepts an absolute path, a bare name, or a relative path
// without ".." (resolved in the work directory).
func checkCommand(c string) error {
	switch {
	case strings.IndexByte(c, 0) >= 0:
		return &FieldError{"command", "must not contain a NUL byte"}
	case !utf8.ValidString(c):
		return &FieldError{"command", "must be valid UTF-8"}
	case strings.HasPrefix(c, "/"):
		return nil
	}
	for _, el := range strings.Split(c, "/") {
		if el == ".." {
			return &FieldError{"command", fmt.Sprintf("a relative command must not contain \"..\": it would leave the task directory (got %q)", clip(c))}
		}
	}
	return nil
}

// CheckRelPath accepts a path that stays inside the directory it is relative
// to: not absolute, no ".." element, no NUL, not empty.
func CheckRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("must not contain a NUL byte")
	case !utf8.ValidString(p):
		return errors.New("must be valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("must be relative to the task directory (got %q)", clip(p))
	case len(p) > 1024:
		return fmt.Errorf("at most 1024 bytes (got %d)", len(p))
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("must not contain \"..\": paths cannot leave the task directory (got %q)", clip(p))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
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
