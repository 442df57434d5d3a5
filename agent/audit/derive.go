package audit

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Subjects are what the writer listens to, beside each agent's inbox
// (protocol.InboxOf, one subscription per agent of the flock: a listener
// on the inbox of an agent the flock does not have would answer for the
// missing mailbox, and a sender would wait instead of hearing at once that
// there is none). Who did it comes from the subject wherever the bus ties
// a subject to its publisher (an agent publishes results and mail only as
// itself); the task, board and broadcast subjects only the operator (and
// the bus, the board service) may publish on. Reads (log requests, the
// roster, a scrape) change nothing and are not recorded: a listener there
// would also keep a request to an agent that is down from failing at once.
var Subjects = []string{
	protocol.SubjectTasks, protocol.SubjectResults, protocol.SubjectBroadcast,
	protocol.SubjectBoardEvents, protocol.SubjectBoardOperator, protocol.SubjectUsage,
	protocol.LedgerPutSubjects,
}

// ledgerState is what the writer remembers of an agent's ledger entry, to
// tell an operator's change from the gateway's charges.
type ledgerState struct {
	epoch          int64
	budget, raised int64
}

// deriver turns bus messages into entries (without Seq, Time, Prev, Hash).
type deriver struct {
	isAgent func(string) bool
	ledger  map[string]ledgerState
}

// derive returns the entry a message makes, or false for a message that
// makes none (a malformed one, the gateway's routine ledger writes, a
// subject of an agent the flock does not have).
func (d *deriver) derive(subject string, h nats.Header, data []byte) (protocol.AuditEntry, bool) {
	t := strings.Split(subject, ".")
	agentOK := func(id string) bool { return id != "" && (d.isAgent == nil || d.isAgent(id)) }
	switch {
	case t[0] == "tasks" && len(t) == 2:
		var task struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &task) // an unreadable task is still sent; its ID stays empty
		if subject == protocol.SubjectTasksPool && h.Get(protocol.HeaderPoolSeq) != "" {
			// The bus queues a pool task again that no agent answered.
			return protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: t[1], What: task.ID, Outcome: "queued again"}, true
		}
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditTaskSent, Agent: t[1], What: task.ID, Trace: protocol.TraceIDOf(h.Get(protocol.HeaderTraceparent))}, true
	case t[0] == "tasks" && len(t) == 3 && t[1] == "pool":
		var task struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &task)
		return protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: t[2], What: task.ID}, agentOK(t[2])
	case len(t) == 3 && t[0] == "task" && t[1] == "result":
		var r struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
			Trace  string `json:"trace"`
		}
		if json.Unmarshal(data, &r) != nil || !agentOK(t[2]) {
			return protocol.AuditEntry{}, false
		}
		return protocol.AuditEntry{Who: t[2], Kind: protocol.AuditTaskResult, What: r.TaskID, Outcome: r.Status, Trace: traceID(r.Trace)}, true
	case len(t) == 4 && t[0] == "agent" && t[2] == "inbox":
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &m)
		if t[3] != protocol.OperatorUser && !agentOK(t[3]) {
			return protocol.AuditEntry{}, false
		}
		return protocol.AuditEntry{Who: t[3], Kind: protocol.AuditMessage, Agent: t[1], What: m.ID}, agentOK(t[1])
	case subject == protocol.SubjectBroadcast:
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &m)
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditBroadcast, What: m.ID}, true
	case len(t) == 4 && t[0] == "board" && t[1] == "events":
		var b protocol.BoardTask
		if json.Unmarshal(data, &b) != nil {
			return protocol.AuditEntry{}, false
		}
		who := b.Holder
		if who == "" {
			who = b.CreatedBy
		}
		return protocol.AuditEntry{Who: who, Kind: protocol.AuditBoardChange, What: t[2] + "/" + t[3], Outcome: b.Status}, true
	case len(t) == 3 && t[0] == "board" && t[1] == "operator":
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditBoardRequest, What: t[2]}, true
	case len(t) == 3 && t[0] == "agent" && t[2] == "usage":
		var u protocol.Usage
		if json.Unmarshal(data, &u) != nil || !agentOK(t[1]) {
			return protocol.AuditEntry{}, false
		}
		return protocol.AuditEntry{Who: protocol.GatewayUser, Kind: protocol.AuditGatewayCall, Agent: t[1], What: u.Upstream,
			Outcome: strconv.Itoa(u.Status), Tokens: u.Total, Trace: traceID(u.Trace)}, true
	case strings.HasPrefix(subject, "$KV."+protocol.LedgerBucket+"."):
		return d.ledgerChange(strings.TrimPrefix(subject, "$KV."+protocol.LedgerBucket+"."), data)
	}
	return protocol.AuditEntry{}, false
}

// ledgerChange makes an entry when an agent's ledger entry starts over or
// its budget or raise changes; the gateway's charges (Spent) make none.
func (d *deriver) ledgerChange(agent string, data []byte) (protocol.AuditEntry, bool) {
	var e protocol.LedgerEntry
	if json.Unmarshal(data, &e) != nil {
		return protocol.AuditEntry{}, false // a delete or purge marker has no body
	}
	now := ledgerState{epoch: e.Epoch, budget: e.Budget, raised: e.Raised}
	was, known := d.ledger[agent]
	d.ledger[agent] = now
	if known && was == now || !known && e.Raised == 0 && e.Epoch == 0 {
		return protocol.AuditEntry{}, false
	}
	who := e.By
	if who == "" {
		who = protocol.GatewayUser
	}
	outcome := "budget " + strconv.FormatInt(e.Budget, 10) + " raised " + strconv.FormatInt(e.Raised, 10) + " epoch " + strconv.FormatInt(e.Epoch, 10)
	return protocol.AuditEntry{Who: who, Kind: protocol.AuditBudgetChange, Agent: agent, Outcome: outcome}, true
}

// traceID keeps a trace ID a body names only if it is one: an agent's
// result cannot put anything else in an entry.
func traceID(s string) string {
	if !protocol.ValidTraceID(s) {
		return ""
	}
	return s
}
