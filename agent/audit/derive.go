package audit

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

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
	protocol.SubjectBoardEvents, protocol.SubjectBoardOperator, protocol.SubjectUsage, protocol.SubjectEgress,
	protocol.LedgerPutSubjects,
}

// ledgerState is what the writer remembers of an agent's ledger entry, to
// tell an operator's change from the gateway's charges.
type ledgerState struct {
	epoch          int64
	budget, raised int64
}

// deriver turns bus messages into entries (without Seq, Time, Prev, Hash).
// It is called from every subscription's goroutine.
type deriver struct {
	isAgent func(string) bool
	mu      sync.Mutex // guards ledger
	ledger  map[string]ledgerState
}

// Senders: the share of the trail an entry is charged to (shares.go).
// An agent's own (what it publishes: results, mail), the services' for an
// agent (a gateway call, a board change it holds, a pool task given to it,
// its ledger started over), and the operator's (its tasks, broadcasts,
// mail and requests, and what the services do for none: a pool task
// queued again, a board task no agent holds).
func forAgent(id string) string { return servicesFor + id }

const servicesFor = "services:"

// invalid is what an entry keeps of a field that breaks its rule: its
// length, never its content (which may be anything an agent chose: 10 KB
// of characters JSON writes as six bytes each). JSON writes "<" and ">" as
// six bytes too, hence the parentheses.
func invalid(s string) string { return "(invalid: " + strconv.Itoa(len(s)) + " bytes)" }

// unreadable is what an entry keeps of a body that is not the JSON it
// should be.
func unreadable(data []byte) string { return "(unreadable: " + strconv.Itoa(len(data)) + " bytes)" }

// checked keeps s if it keeps rule (or is empty: absent), else its length.
func checked(s string, rule func(string) bool) string {
	if s == "" || rule(s) {
		return s
	}
	return invalid(s)
}

func egressKind(s string) bool {
	switch s {
	case protocol.EgressBrokered, protocol.EgressTunnel, protocol.EgressPlain, protocol.EgressRefused:
		return true
	}
	return false
}

func resultStatus(s string) bool {
	switch s {
	case protocol.StatusOK, protocol.StatusFailed, protocol.StatusTimeout, protocol.StatusRejected, protocol.StatusError:
		return true
	}
	return false
}

// user is who a body may name: an agent's ID or one of the flock's own
// users (operator, gateway: they keep the same rule).
func user(s string) bool { return protocol.ValidAgentID(s) }

// derive returns the entry a message makes and the share it is charged
// to, or false for a message that makes none (the gateway's routine
// ledger writes, a subject of an agent the flock does not have, a service's
// message that cannot be read). Every field taken from a body or a subject
// is checked against the protocol's rule for it and kept as its length
// when it breaks it: no entry is over protocol.MaxAuditEntry.
func (d *deriver) derive(subject string, h nats.Header, data []byte) (protocol.AuditEntry, string, bool) {
	t := strings.Split(subject, ".")
	agentOK := func(id string) bool { return protocol.ValidAgentID(id) && (d.isAgent == nil || d.isAgent(id)) }
	switch {
	case t[0] == "tasks" && len(t) == 2:
		var task struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &task) // an unreadable task is still sent; its ID stays empty
		to := checked(t[1], func(s string) bool { return s == "all" || s == protocol.ConsumerPool || protocol.ValidAgentID(s) })
		if subject == protocol.SubjectTasksPool && h.Get(protocol.HeaderPoolSeq) != "" {
			// The bus queues a pool task again that no agent answered.
			return protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: to, What: checked(task.ID, protocol.ValidTaskID), Outcome: "queued again"}, protocol.OperatorUser, true
		}
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditTaskSent, Agent: to, What: checked(task.ID, protocol.ValidTaskID),
			Trace: protocol.TraceIDOf(h.Get(protocol.HeaderTraceparent))}, protocol.OperatorUser, true
	case t[0] == "tasks" && len(t) == 3 && t[1] == "pool":
		var task struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &task)
		return protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: t[2], What: checked(task.ID, protocol.ValidTaskID)}, forAgent(t[2]), agentOK(t[2])
	case len(t) == 3 && t[0] == "task" && t[1] == "result":
		if !agentOK(t[2]) {
			return protocol.AuditEntry{}, "", false
		}
		var r struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
			Trace  string `json:"trace"`
		}
		e := protocol.AuditEntry{Who: t[2], Kind: protocol.AuditTaskResult}
		if json.Unmarshal(data, &r) != nil {
			// An agent published something on its result subject: a deed
			// of its, recorded (and charged to its share) as such.
			e.Outcome = unreadable(data)
			return e, t[2], true
		}
		e.What, e.Outcome, e.Trace = checked(r.TaskID, protocol.ValidTaskID), checked(r.Status, resultStatus), traceID(r.Trace)
		return e, t[2], true
	case t[0] == "agent" && len(t) >= 4 && t[2] == "inbox":
		to, from, ok := protocol.ParseInbox(subject)
		if !ok || from != protocol.OperatorUser && !agentOK(from) || !agentOK(to) {
			return protocol.AuditEntry{}, "", false
		}
		var m struct {
			ID string `json:"id"`
		}
		e := protocol.AuditEntry{Who: from, Kind: protocol.AuditMessage, Agent: to}
		if json.Unmarshal(data, &m) != nil {
			e.Outcome = unreadable(data)
		}
		e.What = checked(m.ID, protocol.ValidTaskID) // a message's ID keeps a task ID's rule (agent/mailbox)
		return e, from, true
	case subject == protocol.SubjectBroadcast:
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(data, &m)
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditBroadcast, What: checked(m.ID, protocol.ValidTaskID)}, protocol.OperatorUser, true
	case len(t) == 4 && t[0] == "board" && t[1] == "events":
		var b protocol.BoardTask
		if json.Unmarshal(data, &b) != nil {
			return protocol.AuditEntry{}, "", false
		}
		who := b.Holder
		if who == "" {
			who = b.CreatedBy
		}
		who = checked(who, user)
		sender := protocol.OperatorUser
		if who != protocol.OperatorUser && agentOK(who) {
			sender = forAgent(who)
		}
		return protocol.AuditEntry{Who: who, Kind: protocol.AuditBoardChange, What: checked(t[2], protocol.ValidBoardID) + "/" + checked(t[3], protocol.ValidBoardID),
			Outcome: checked(b.Status, protocol.ValidBoardStatus)}, sender, true
	case len(t) == 3 && t[0] == "board" && t[1] == "operator":
		return protocol.AuditEntry{Who: protocol.OperatorUser, Kind: protocol.AuditBoardRequest, What: checked(t[2], protocol.ValidBoardID)}, protocol.OperatorUser, true
	case len(t) == 3 && t[0] == "agent" && t[2] == "usage":
		var u protocol.Usage
		if json.Unmarshal(data, &u) != nil || !agentOK(t[1]) {
			return protocol.AuditEntry{}, "", false
		}
		return protocol.AuditEntry{Who: protocol.GatewayUser, Kind: protocol.AuditGatewayCall, Agent: t[1], What: checked(u.Upstream, protocol.ValidUpstreamName),
			Outcome: strconv.Itoa(u.Status), Tokens: u.Total, Trace: traceID(u.Trace)}, forAgent(t[1]), true
	case len(t) == 3 && t[0] == "agent" && t[2] == "egress":
		// One entry per connection, never per request; the name the agent
		// asked for only if it is one, never a path, query or credential.
		var u protocol.EgressUse
		if json.Unmarshal(data, &u) != nil || !agentOK(t[1]) {
			return protocol.AuditEntry{}, "", false
		}
		var refusal string
		if len(u.Refusals) > 0 {
			refusal = strings.TrimSpace(u.Refusals[0].Method + " " + u.Refusals[0].Path)
		}
		return protocol.AuditEntry{Who: protocol.GatewayUser, Kind: protocol.AuditEgress, Agent: t[1], What: checked(u.Host, protocol.ValidEgressHost),
			Outcome: checked(u.Kind, egressKind), Requests: max(0, u.Requests), Refused: max(0, u.Refused), Sent: max(0, u.Sent), Received: max(0, u.Received),
			Refusal: checked(refusal, protocol.ValidEgressRefusal)}, forAgent(t[1]), true
	case strings.HasPrefix(subject, "$KV."+protocol.LedgerBucket+"."):
		return d.ledgerChange(strings.TrimPrefix(subject, "$KV."+protocol.LedgerBucket+"."), data)
	}
	return protocol.AuditEntry{}, "", false
}

// ledgerChange makes an entry when an agent's ledger entry starts over or
// its budget or raise changes; the gateway's charges (Spent) make none.
func (d *deriver) ledgerChange(agent string, data []byte) (protocol.AuditEntry, string, bool) {
	var e protocol.LedgerEntry
	if !protocol.ValidAgentID(agent) || json.Unmarshal(data, &e) != nil {
		return protocol.AuditEntry{}, "", false // a delete or purge marker has no body
	}
	now := ledgerState{epoch: e.Epoch, budget: e.Budget, raised: e.Raised}
	d.mu.Lock()
	was, known := d.ledger[agent]
	d.ledger[agent] = now
	d.mu.Unlock()
	if known && was == now || !known && e.Raised == 0 && e.Epoch == 0 {
		return protocol.AuditEntry{}, "", false
	}
	who := checked(e.By, user)
	if who == "" {
		who = protocol.GatewayUser
	}
	sender := forAgent(agent)
	if who == protocol.OperatorUser {
		sender = protocol.OperatorUser
	}
	outcome := "budget " + strconv.FormatInt(e.Budget, 10) + " raised " + strconv.FormatInt(e.Raised, 10) + " epoch " + strconv.FormatInt(e.Epoch, 10)
	return protocol.AuditEntry{Who: who, Kind: protocol.AuditBudgetChange, Agent: agent, Outcome: outcome}, sender, true
}

// traceID keeps a trace ID a body names only if it is one: an agent's
// result cannot put anything else in an entry.
func traceID(s string) string {
	if !protocol.ValidTraceID(s) {
		return ""
	}
	return s
}
