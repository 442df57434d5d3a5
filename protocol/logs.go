package protocol

import "time"

// An agent's recent log lines, asked for over the bus: the operator has no
// access to the agents' log files (they live in each agent's own
// directory), so `flock-agent top` asks the agent itself, with a bounded
// request on its own subject. Only the agent may answer there (it alone may
// subscribe to it); only the operator may ask.

// LogsSubject is where agent id answers for its recent log lines.
func LogsSubject(id string) string { return "agent." + id + ".logs" }

// SubjectLogs is every agent's logs subject: what the operator may ask on.
const SubjectLogs = "agent.*.logs"

// Bounds of a logs request: the agent keeps its last LogsKeepLines lines
// (each cut at LogsMaxLineBytes) and answers with at most LogsMaxBytes of
// them, the newest, so a reply always fits the bus's payload limit.
const (
	LogsKeepLines    = 200
	LogsMaxLineBytes = 2 << 10
	LogsMaxBytes     = 64 << 10
)

// LogsRequest asks an agent for its last Lines log lines (LogsKeepLines at
// most; all it keeps when 0).
type LogsRequest struct {
	Lines int `json:"lines,omitempty"`
}

// LogsReply is the agent's answer: its runtime's JSON log lines, oldest
// first. Truncated says older lines were left out to keep within the bounds.
type LogsReply struct {
	V         int      `json:"v"`
	Agent     string   `json:"agent"`
	Lines     []string `json:"lines"`
	Truncated bool     `json:"truncated,omitempty"`
}

// RunningTask is one task an agent runs now, as its heartbeat reports it
// (a board task by its run's name, board-<plan>.<task>-<attempt>).
type RunningTask struct {
	ID    string    `json:"id"`
	Kind  string    `json:"kind"`
	Since time.Time `json:"since"` // when it started
	// Traceparent is the task's span (its process's TRACEPARENT), when
	// it runs in a trace: the gateway ties an untraced call to it when it
	// is the agent's one running task.
	Traceparent string `json:"traceparent,omitempty"`
}
