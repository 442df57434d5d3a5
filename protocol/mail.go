package protocol

import (
	"strings"
	"time"
)

// Mail that waits. Each agent's inbox subject (agent.<id>.inbox.<from>) is
// captured by a stream of that agent's own, so a message to an agent that is
// down (or restarting, or behind a bus node that went) waits there until the
// agent takes it. The stream is replicated like the others and bounded per
// agent (MailMessages, MailBytes) and per sender (MailPerSender): a sender
// flooding one agent fills only its own share and is then refused.
//
// A sender gets two answers, two different promises:
//
//   - queued: the bus stored the message in the agent's mailbox (the
//     JetStream acknowledgement of the publish). It will be delivered when
//     the agent takes it, unless it waits longer than flock:bus.streamMaxAge;
//   - delivered: the agent stored the message in a file of its inbox
//     directory (Receipt.File), where its work reads it. The agent publishes
//     this receipt on the subject the sender named in the Flock-Receipt
//     header, which must lie in the sender's own reply inbox.
//
// The bounds are fixed so that the mailboxes fit the bus's store beside the
// other streams even in a flock of 500 agents (each agent's MailBytes of the
// store is counted in flock:bus.jetStreamMaxMiB), and so that one sender's
// share (MailPerSender of the largest messages) is at most about a third of
// a mailbox's bytes: a mailbox is full only when several senders fill it.
// The operator's mail has a share of its own beside it (OperatorMailStream),
// which no agent's mail counts against.
const (
	MailConsumer     = "inbox"  // the durable consumer of each mailbox, pulled by its agent only
	MailMessages     = 256      // messages waiting in one agent's mailbox
	MailBytes        = 2 << 20  // bytes waiting for one agent: its mailbox and the operator's share
	MailPerSender    = 16       // messages one sender may have waiting in one mailbox
	MailMessageBytes = 32 << 10 // the largest message (its JSON body)
	HeaderReceipt    = "Flock-Receipt"
	ReceiptQueued    = "queued"
	ReceiptDelivered = "delivered"
	// ReceiptDuplicate: the mailbox already held a message of this sender
	// with this ID and dropped this copy (never "queued").
	ReceiptDuplicate = "duplicate"
	// InboxPerSender is how many of one sender's messages an agent keeps
	// in its inbox directory untaken: past it the sender's mail waits in
	// the mailbox (where its share is MailPerSender), then it is refused.
	InboxPerSender = 64
)

// MailDuplicateWindow is how long a mailbox remembers a message's ID
// (MailMsgID): a message of the same sender with the same ID within it is
// dropped, and its sender told so (ReceiptDuplicate).
const MailDuplicateWindow = 2 * time.Minute

// MailStream is agent id's mailbox: the stream of agent.<id>.inbox.*.
func MailStream(id string) string { return "FLOCK_MAIL_" + id }

// OperatorMailStream is the operator's share of agent id's mailbox: the
// stream of OperatorInboxSubject(id), as many messages as one sender's share
// (MailPerSender), which no agent can publish on and so none can fill.
func OperatorMailStream(id string) string { return "FLOCK_OPMAIL_" + id }

// OperatorMailBytes bounds the operator's share of one agent's MailBytes:
// its MailPerSender largest messages with their headers. The rest,
// SharedMailBytes, is the mailbox every other sender shares.
const (
	OperatorMailBytes = MailPerSender * (MailMessageBytes + 4<<10)
	SharedMailBytes   = MailBytes - OperatorMailBytes
)

// MailMsgID is the deduplication ID of a message: the sender's message ID
// under the sender's name, so that a sender's retry is stored once and no
// sender can suppress another's message by reusing its ID.
func MailMsgID(from, id string) string { return from + ":" + id }

// ReceiptSubjectOf reports whether subject is a place to send sender from a
// delivery receipt: a reply inbox of from's own (_INBOX.<from>.…), never
// another user's, nor anything outside the reply inboxes.
func ReceiptSubjectOf(from, subject string) bool {
	token := from
	if from == OperatorUser {
		token = OperatorInboxToken
	}
	return IsReplyInbox(subject) && strings.HasPrefix(subject, InboxPrefix(token)+".")
}
