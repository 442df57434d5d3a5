package busconfig

// What each bus user may publish and subscribe to: the rendered config's
// permissions, one function a user.

import (
	"github.com/ai-flock/ai-flock/protocol"
)

// ackSubjects are a consumer's ack subjects in both JetStream layouts, each
// with exactly the token count the server subscribes with (nats-server
// 2.15 subscribes every consumer to both): the classic
// $JS.ACK.<stream>.<consumer>.<5 numbers> (9 tokens, what 2.15 sends by
// default) and $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<5 or
// more> (11 or more). A pattern with fewer fixed tokens lets a subject of
// one layout name another consumer in the other: "$JS.ACK.*.*.<stream>.
// agent-1.>" matched $JS.ACK.<stream>.agent-2.<stream>.agent-1.x.x.x, a
// 9-token classic ack of agent-2's consumer, so agent-1 could pull
// agent-2's tasks with +NXT. Permissions are tested against the shipped
// server version.
func ackSubjects(stream, consumer string) []string {
	return []string{
		"$JS.ACK." + stream + "." + consumer + ".*.*.*.*.*",
		"$JS.ACK.*.*." + stream + "." + consumer + ".*.*.*.*.>",
	}
}

// pullSubjects are what pulling one durable consumer takes: the next
// messages, its info, and its acks.
func pullSubjects(stream, consumer string) []string {
	return append([]string{
		"$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer,
		"$JS.API.CONSUMER.INFO." + stream + "." + consumer,
	}, ackSubjects(stream, consumer)...)
}

// AgentPermissions is exactly what one agent may do on the bus: publish its
// own results, events and heartbeats, message any agent's inbox as itself,
// ask the bus for the roster, ask the board on its own request subjects,
// pull and ack its own consumer (which also delivers the pool tasks the bus
// gives it) and its own mailbox's; read its own replies, broadcast and the
// board's ready bell (not the board's events, nor its bucket), and the
// operator's requests for its recent log lines on its own subject; answer a
// message (the delivery receipt) into a reply inbox (_INBOX.<user>.…), the
// only reply subjects a legitimate requester gives.
//
// Not allow_responses: it lets a user answer a message on whatever reply
// subject the message carries, and nats-server checks it after the deny
// list, so no deny can narrow it. A peer sending agent-2 a message whose
// reply subject was tasks.agent-3 had agent-2's receipt published there in
// agent-2's name. A reply inbox's last tokens are random (nats.go: 22
// characters of NUID per connection): an agent can write into another's
// reply inbox space, never into a request it did not receive.
func AgentPermissions(id string) Permissions {
	pub := []string{
		protocol.ResultSubject(id),
		protocol.EventsSubject(id),
		protocol.HeartbeatSubject(id),
		protocol.InboxFrom(id),
		protocol.SubjectRoster,
		protocol.ReplyInboxes,
		protocol.BoardAgentRequests(id), // the board knows the caller by the subject
	}
	// Its own consumer only: pool tasks reach it there, handed out by the
	// bus (protocol.PoolTaskSubject), never pulled from the pool itself.
	pub = append(pub, pullSubjects(protocol.StreamTasks, protocol.AgentConsumer(id))...)
	// Its own mailbox, pulled from its consumer: messages reach it there,
	// never on the inbox subject itself (the mailbox stream captures it).
	pub = append(pub, pullSubjects(protocol.MailStream(id), protocol.MailConsumer)...)
	pub = append(pub, pullSubjects(protocol.OperatorMailStream(id), protocol.MailConsumer)...)
	return Permissions{
		Publish: Rule{Allow: pub},
		Subscribe: Rule{Allow: []string{
			protocol.InboxPrefix(id) + ".>",
			protocol.SubjectBroadcast,
			protocol.SubjectBoardReady,
			protocol.LogsSubject(id), // the operator's request for its recent log lines
		}},
	}
}

// OperatorPermissions: send tasks, inbox messages (as "operator") and
// broadcasts, ask for the roster, use the JetStream API (results, dead
// letters), raise and reset budgets in the ledger, ask the board as the
// operator, ask an agent for its recent log lines; watch results, events,
// heartbeats, the gateway's usage and the board's transitions. It cannot
// publish as an agent (results, events, heartbeats, inbox messages).
func OperatorPermissions() Permissions {
	return Permissions{
		Publish: Rule{Allow: []string{
			protocol.SubjectTasks, protocol.InboxFrom(protocol.OperatorUser), protocol.OperatorInboxSubject("*"), protocol.SubjectBroadcast, protocol.SubjectRoster,
			"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", protocol.LedgerPutSubjects,
			protocol.SubjectBoardOperator,
			protocol.SubjectLogs, // ask an agent for its recent log lines
		}},
		Subscribe: Rule{Allow: []string{
			protocol.InboxPrefix(protocol.OperatorInboxToken) + ".>",
			protocol.SubjectResults, protocol.SubjectEvents, protocol.SubjectHeartbeats,
			protocol.SubjectDead, protocol.SubjectBroadcast, protocol.SubjectUsage,
			protocol.SubjectBoardEvents, protocol.SubjectBoardReady,
		}},
	}
}

// GatewayPermissions: the model gateway publishes what each agent's calls
// cost (agent.<id>.usage, any agent's: it meters them all) and what each
// egress connection did (agent.<id>.egress), and reads and
// writes the entries of the spending ledger's bucket (binding it, a direct
// get, a compare-and-set put), nothing else of JetStream; it may only
// subscribe to its own reply inbox, the spans it exports and the
// agents' heartbeats (an empty allow list would allow
// everything).
func GatewayPermissions() Permissions {
	return Permissions{
		Publish: Rule{Allow: []string{
			protocol.SubjectUsage, protocol.SubjectEgress,
			protocol.LedgerPutSubjects,
			"$JS.API.STREAM.INFO." + protocol.LedgerStream,
			"$JS.API.DIRECT.GET." + protocol.LedgerStream + ".>",
			"$JS.API.STREAM.MSG.GET." + protocol.LedgerStream,
		}},
		// The flock's spans, which it exports when an OTLP endpoint is set,
		// and the agents' heartbeats (which tasks each runs: an untraced
		// call is tied to an agent's one running task).
		Subscribe: Rule{Allow: []string{protocol.InboxPrefix(protocol.GatewayUser) + ".>", protocol.SpansSubject, protocol.SubjectHeartbeats}},
	}
}

// ServicesPermissions: the flock's services (the board service) answer
// the board's request subjects (a queue group, so that several may run),
// answer into reply inboxes, announce transitions and the ready bell, and
// use exactly the JetStream buckets they keep: the board's bucket and
// artifact store (read and write), and the services bucket, where the bus
// writes their configuration (read only). The exporter listens to
// heartbeats, results, events and usage, answers scrapes, and asks for the
// streams' state and the task consumers' (read only). The audit writer
// listens to tasks, results, mail, broadcasts, board changes and requests,
// usage and the ledger's writes as they cross the bus,
// appends to the audit trail, removes what its retention let go and keeps
// the trail's anchors. The spans they derive go to the gateway on
// protocol.SpansSubject. Nothing of the task or mailbox streams, the
// ledger's bucket, or the JetStream API beyond those.
func ServicesPermissions() Permissions {
	pub := []string{
		protocol.ReplyInboxes, // the service checks each reply subject is one (protocol.IsReplyInbox)
		protocol.SubjectBoardEvents, protocol.SubjectBoardReady,
		"$KV." + protocol.BoardBucket + ".>",
		"$O." + protocol.ArtifactBucket + ".>",
		"$JS.API.STREAM.PURGE." + protocol.ArtifactStream, // deleting an artifact purges its chunks
		// The exporter: every stream's state, and the task consumers'.
		"$JS.API.STREAM.LIST", "$JS.API.STREAM.INFO." + protocol.StreamTasks, "$JS.API.CONSUMER.LIST." + protocol.StreamTasks,
		// The audit writer: the trail's one subject, the removal of what
		// retention let go, and the anchors' bucket.
		protocol.AuditSubject, "$JS.API.STREAM.PURGE." + protocol.AuditStream,
		"$KV." + protocol.AuditAnchorsBucket + ".>",
		// The spans derived from the bus, for the gateway to export.
		protocol.SpansSubject,
	}
	for _, stream := range []string{protocol.BoardStream, protocol.ArtifactStream, protocol.ServicesStream, protocol.AuditStream, protocol.AuditAnchorsStream} {
		pub = append(pub, readStreamSubjects(stream)...)
	}
	return Permissions{
		Publish: Rule{Allow: pub},
		Subscribe: Rule{Allow: []string{
			protocol.InboxPrefix(protocol.ServicesUser) + ".>",
			protocol.SubjectBoardAgentRequests, protocol.SubjectBoardOperator,
			// The exporter counts what crosses the bus and answers scrapes.
			protocol.SubjectHeartbeats, protocol.SubjectResults, protocol.SubjectEvents, protocol.SubjectUsage,
			protocol.SubjectEgress, protocol.SubjectMetrics,
			// The audit writer derives its entries from what crosses the
			// bus (it reads IDs and statuses of these, never keeps a body).
			protocol.SubjectTasks, protocol.InboxOf("*"), protocol.OperatorInboxSubject("*"), protocol.SubjectBroadcast, protocol.SubjectBoardEvents,
			protocol.LedgerPutSubjects,
		}},
	}
}

// readStreamSubjects are what reading one stream takes: binding it, a
// direct or API get, and the ordered consumers a watch, a list or an
// object's download creates (with their flow control).
func readStreamSubjects(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.DIRECT.GET." + stream, "$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.CONSUMER.CREATE." + stream, "$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}
