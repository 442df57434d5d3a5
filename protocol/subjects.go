// Package protocol is the bus contract: everything the agent runtime, the
// operator CLI, the bus and the stacks must agree on, spelled once. Subjects,
// streams and consumers (subjects.go), message bodies (messages.go), the
// bus's ports, file paths, user names and JetStream topology (bus.go), how
// the bus's files travel through the environment on Fargate (busenv.go), and
// the agent container's paths, environment and labels (container.go). It
// imports nothing of the project's: the runtime (agent/) and the
// infrastructure (infra/) both import it, and the runtime nothing of infra/.
package protocol

import "strings"

// JetStream streams and consumers. The bus creates them at start; agents only
// pull from their own consumer and the shared pool consumer.
const (
	StreamTasks = "FLOCK_TASKS" // tasks.>
	// StreamResults was the one results stream all agents shared; the bus
	// removes it. Each agent's results now have a stream of their own
	// (ResultsStream), so no agent can evict another's.
	StreamResults = "FLOCK_RESULTS"
	StreamDead    = "FLOCK_DEAD"   // deadletter.>
	StreamStatus  = "FLOCK_STATUS" // agent.*.heartbeat, the last one of each agent

	ConsumerPool = "pool" // shared work queue on tasks.pool: one agent runs each task
)

// Subjects.
const (
	SubjectTasksAll    = "tasks.all"     // every agent runs it
	SubjectTasksPool   = "tasks.pool"    // exactly one agent runs it
	SubjectTasks       = "tasks.>"       // everything the task stream stores
	SubjectResults     = "task.result.>" // every result, whoever sent it
	SubjectBroadcast   = "broadcast"     // operator announcements
	SubjectDead        = "deadletter.>"  // parked tasks
	SubjectHeartbeats  = "agent.*.heartbeat"
	SubjectEvents      = "agent.*.events"
	SubjectRoster      = "flock.roster" // request: the bus answers with the flock's agent IDs
	OperatorUser       = "operator"
	OperatorInboxToken = "operator"
)

// TaskSubject is where the operator sends a task for one agent.
func TaskSubject(id string) string { return "tasks." + id }

// ResultSubject is where an agent publishes results. The contract's
// "task.result" gains the publisher's ID so the server, not the body, says
// who sent a result: an agent may publish only on its own.
func ResultSubject(id string) string { return "task.result." + id }

// EventsSubject carries an agent's lifecycle events.
func EventsSubject(id string) string { return "agent." + id + ".events" }

// HeartbeatSubject carries an agent's periodic status.
func HeartbeatSubject(id string) string { return "agent." + id + ".heartbeat" }

// InboxSubject is where from sends a message to agent to. The last token is
// the sender, and the bus lets each user publish only with its own ID there
// (the operator as "operator"): the receiver takes the sender from the
// subject, never from the body.
func InboxSubject(to, from string) string { return "agent." + to + ".inbox." + from }

// InboxOf is what agent id subscribes to: its inbox, from any sender.
func InboxOf(id string) string { return "agent." + id + ".inbox.*" }

// InboxFrom is what sender from may publish on: any agent's inbox, as itself.
func InboxFrom(from string) string { return "agent.*.inbox." + from }

// OperatorInboxSubject is where the operator's own tools send an agent
// mail: agent.<to>.inbox.operator.mail, captured by a mailbox of its own
// (OperatorMailStream), so that no number of agents filling an agent's
// mailbox can refuse the operator's message. Only the operator may publish
// there; the operator's mail on the plain inbox subject shares the mailbox
// with the agents'.
func OperatorInboxSubject(to string) string {
	return InboxSubject(to, OperatorUser) + "." + operatorMailToken
}

const operatorMailToken = "mail"

// MailSubject is where from's tools send mail to agent to: the operator's
// own subject for the operator, the inbox subject for everyone else.
func MailSubject(to, from string) string {
	if from == OperatorUser {
		return OperatorInboxSubject(to)
	}
	return InboxSubject(to, from)
}

// InboxesOf are every subject of agent id's inbox: its mail from any sender,
// and the operator's own.
func InboxesOf(id string) []string { return []string{InboxOf(id), OperatorInboxSubject(id)} }

// ParseInbox reads an inbox subject (InboxSubject or OperatorInboxSubject):
// to whom, from whom.
func ParseInbox(subject string) (to, from string, ok bool) {
	t := strings.Split(subject, ".")
	switch {
	case len(t) == 4 && t[0] == "agent" && t[2] == "inbox" && t[1] != "" && t[3] != "":
		return t[1], t[3], true
	case len(t) == 5 && t[0] == "agent" && t[2] == "inbox" && t[1] != "" && t[3] == OperatorUser && t[4] == operatorMailToken:
		return t[1], t[3], true
	}
	return "", "", false
}

// InboxSender returns the sender token of an inbox subject.
func InboxSender(subject string) (string, bool) {
	_, from, ok := ParseInbox(subject)
	return from, ok
}

// InboxPrefix is the reply-inbox prefix of a bus user (nats.CustomInboxPrefix):
// replies to agent-1 arrive on _INBOX.agent-1.>, which no one else may read.
func InboxPrefix(user string) string { return "_INBOX." + user }

// ReplyInboxes are every user's reply inboxes: the only subjects an agent
// answers a message on.
const ReplyInboxes = "_INBOX.>"

// IsReplyInbox reports whether subject is in a user's reply inbox.
func IsReplyInbox(subject string) bool {
	user, rest, ok := strings.Cut(strings.TrimPrefix(subject, "_INBOX."), ".")
	return strings.HasPrefix(subject, "_INBOX.") && ok && user != "" && rest != "" && !strings.ContainsAny(subject, " \t\r\n*>")
}

// ResultsStream is the stream holding agent id's results (task.result.<id>),
// bounded on its own: an agent flooding its results evicts only its own.
func ResultsStream(id string) string { return "FLOCK_RESULTS_" + id }

// AgentConsumer is the durable consumer of an agent's own tasks (tasks.<id> and tasks.all).
func AgentConsumer(id string) string { return id }

// DeadSubject is where the bus parks a task its consumer gave up on.
func DeadSubject(consumer string) string { return "deadletter." + consumer }
