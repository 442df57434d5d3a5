package worker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// mailLoop takes the agent's mail from one of its mailboxes
// (protocol.MailStream, and protocol.OperatorMailStream for the operator's
// share), where the bus keeps each message from the moment its sender hears
// "queued" until the agent has stored it: a message sent while the agent
// was down is taken when it starts. Each message is stored by a queue of
// its sender's own, at that sender's rate (INBOX_RATE, INBOX_BYTES_RATE),
// and acknowledged only once its file is written, so a crash in between
// delivers it again (and the copy already stored is found, not doubled).
// The bus holds at most protocol.MailPerSender messages of one sender, so
// a flood waits there or is refused at the bus, never here.
func (a *Agent) mailLoop(ctx context.Context, stream string) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cons, err := a.lookup(ctx, stream, protocol.MailConsumer)
		if err != nil {
			return // ctx ended
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(protocol.MailPerSender))
		if err != nil {
			a.log.Warn("mailbox unavailable", "stream", stream, "err", err)
			if !pace.Sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				it.Stop()
				if ctx.Err() != nil {
					return // unacked mail goes back to the mailbox
				}
				a.log.Warn("mailbox interrupted", "stream", stream, "err", err)
				pace.Sleep(ctx, backoff)
				break
			}
			a.takeMail(msg)
		}
	}
}

// takeMail hands one message of the mailbox to its sender's queue.
func (a *Agent) takeMail(msg jetstream.Msg) {
	from, ok := protocol.InboxSender(msg.Subject())
	if !ok {
		a.log.Warn("mail on an unexpected subject dropped", "subject", msg.Subject())
		_ = msg.Term()
		return
	}
	st := stored("inbox", msg.Subject(), from, msg.Data())
	receiptTo := msg.Headers().Get(protocol.HeaderReceipt)
	if receiptTo != "" && !protocol.ReceiptSubjectOf(from, receiptTo) {
		// Only the sender's own reply inbox: a sender naming another
		// user's would have this agent publish there in its name.
		a.log.Warn("receipt subject of another user ignored", "id", st.Message.ID, "from", from, "receipt", receiptTo)
		receiptTo = ""
	}
	receipt := protocol.Receipt{V: protocol.Version, ID: st.Message.ID, To: a.cfg.ID, From: from, Status: protocol.ReceiptDelivered}
	if meta, err := msg.Metadata(); err == nil {
		receipt.Seq = meta.Sequence.Stream
		if meta.NumDelivered > 1 {
			// Taken before and perhaps stored, but not acknowledged.
			if rel := a.storedBefore(st); rel != "" {
				receipt.File = rel
				_ = msg.Ack()
				a.respond(receiptTo, receipt)
				return
			}
		}
	}
	if !a.mail.submit(from, func(ctx context.Context) {
		if n := a.untaken.count(from); n >= protocol.InboxPerSender {
			// The sender's share of the inbox directory is full: its mail
			// waits in the mailbox until the agent takes some, and past
			// its share there the bus refuses the sender.
			if a.senders.warn(from) {
				a.log.Warn("mail waits in the mailbox: the sender's share of the inbox is full", "from", from, "untaken", n, "max", protocol.InboxPerSender)
			}
			_ = msg.NakWithDelay(2 * time.Second)
			return
		}
		if err := a.senders.wait(ctx, from, len(msg.Data())); err != nil {
			_ = msg.Nak() // stopping: the mailbox keeps it
			return
		}
		rel, err := a.write(st)
		if err != nil {
			// The disk refused it (full?): the mailbox keeps it and
			// offers it again; the sender still holds "queued".
			_ = msg.NakWithDelay(5 * time.Second)
			return
		}
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := msg.DoubleAck(actx); err != nil {
			a.log.Warn("stored mail not acknowledged: the bus offers it again", "id", st.Message.ID, "from", from, "err", err)
		}
		receipt.File = rel
		a.respond(receiptTo, receipt)
	}) {
		_ = msg.NakWithDelay(time.Second)
	}
}

// storedBefore finds the file a message of the same sender and ID was
// stored in, if any (a delivery again after a crash or a lost ack), untaken
// or taken since.
func (a *Agent) storedBefore(st Stored) string {
	for _, dir := range []string{"", TakenDir} {
		matches, _ := filepath.Glob(filepath.Join(a.inboxDir, dir, "*-inbox-"+st.Message.ID+".json"))
		for _, m := range matches {
			var prev Stored
			if b, err := os.ReadFile(m); err == nil && json.Unmarshal(b, &prev) == nil && prev.From == st.From {
				return filepath.Join("inbox", dir, filepath.Base(m))
			}
		}
	}
	return ""
}
