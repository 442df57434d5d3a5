package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The flock's services hold their own bus user: the board's subjects and
// buckets; of the agents' subjects, only listening to what the exporter
// counts (heartbeats, results, events, usage) and the audit writer records
// (tasks, mail, broadcasts as they cross), and of the task stream only
// its state; nothing of the task stream's messages, mailboxes or the ledger's bucket, no
// publishing in an agent's or the gateway's name, and they only read the
// bucket the bus configures them in.
func TestServicesPermissionsOnTheRealServer(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	op := f.ConnectRecorded(t, protocol.OperatorUser)
	svc := f.ConnectRecorded(t, protocol.ServicesUser)

	for _, subj := range []string{
		protocol.TaskSubject("agent-1"), protocol.ResultSubject("agent-1"), protocol.HeartbeatSubject("agent-1"),
		protocol.InboxSubject("agent-1", protocol.ServicesUser), protocol.InboxSubject("agent-1", protocol.OperatorUser),
		protocol.SubjectBroadcast, protocol.UsageSubject("agent-1"), protocol.BoardAgentSubject("agent-1", protocol.BoardOpClaim), protocol.BoardOperatorSubject(protocol.BoardOpCancel),
		"$KV." + protocol.ServicesBucket + "." + protocol.ServicesAgentKey("agent-1"),
		"$KV." + protocol.LedgerBucket + ".agent-1",
		"$JS.API.STREAM.MSG.GET." + protocol.StreamTasks, "$JS.API.DIRECT.GET." + protocol.StreamTasks, "$JS.API.STREAM.PURGE." + protocol.BoardStream,
		"$JS.API.STREAM.INFO." + protocol.MailStream("agent-1"), "$JS.API.CONSUMER.LIST." + protocol.MailStream("agent-1"),
		"$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamTasks + "." + protocol.AgentConsumer("agent-1"),
		"$JS.API.STREAM.DELETE." + protocol.ServicesStream,
	} {
		ch := listen(t, op.Conn, subj)
		if subj[0] == '$' {
			ch = nil
		}
		_ = svc.Publish(subj, []byte("{}"))
		svc.Denied(t, "publish", subj)
		if ch != nil {
			nothing(t, ch, "the services published on "+subj)
		}
	}
	// The audit writer listens to tasks, mail and broadcasts as they cross
	// the bus; an agent's reply inbox and the dead letters stay closed.
	for _, subj := range []string{protocol.InboxPrefix("agent-1") + ".>", protocol.SubjectDead, protocol.InboxPrefix(protocol.OperatorUser) + ".>"} {
		if _, err := svc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		svc.Denied(t, "subscription", subj)
	}

	// What they may do: read their configuration, and the board's bucket.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js := bustest.JetStream(t, svc.Conn)
	kv, err := js.KeyValue(ctx, protocol.ServicesBucket)
	if err != nil {
		t.Fatalf("bind the services bucket: %v", err)
	}
	if _, err := kv.Get(ctx, protocol.ServicesAgentKey("agent-2")); err != nil {
		t.Fatalf("read agent-2's entry: %v", err)
	}
	if _, err := js.KeyValue(ctx, protocol.BoardBucket); err != nil {
		t.Fatalf("bind the board's bucket: %v", err)
	}
	// The exporter's: the task stream's state, not its messages.
	tasks, err := js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		t.Fatalf("the task stream's state: %v", err)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	_, err = tasks.GetLastMsgForSubject(short, protocol.SubjectTasks)
	stop()
	if err == nil {
		t.Fatal("the services read a task")
	}
	svc.Denied(t, "publish", "$JS.API.STREAM.MSG.GET."+protocol.StreamTasks)
	for _, subj := range []string{protocol.SubjectResults, protocol.SubjectHeartbeats, protocol.SubjectEvents, protocol.SubjectUsage} {
		if _, err := svc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	svc.NoErrors(t, 300*time.Millisecond) // the exporter's subscriptions stand
	// A denied request has no answer: a second is as good as ten to see it.
	short, stop = context.WithTimeout(ctx, time.Second)
	_, err = js.KeyValue(short, protocol.LedgerBucket)
	stop()
	if err == nil {
		t.Fatal("the services bound the ledger")
	}
	svc.Denied(t, "publish", "$JS.API.STREAM.INFO.KV_"+protocol.LedgerBucket)
}

// No agent can stand in for the services: it may not hear the board's
// requests (its own or another's), nor read or write the buckets they keep.
func TestAgentsCannotStandInForTheServices(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	a1 := f.ConnectRecorded(t, "agent-1")
	for _, subj := range []string{protocol.SubjectBoardAgentRequests, protocol.BoardAgentSubject("agent-2", protocol.BoardOpClaim), protocol.BoardAgentSubject("agent-1", protocol.BoardOpClaim), protocol.SubjectBoardOperator} {
		if _, err := a1.QueueSubscribeSync(subj, protocol.BoardQueueGroup); err != nil {
			t.Fatal(err)
		}
		a1.Denied(t, "subscription", subj)
	}
	for _, subj := range []string{"$KV." + protocol.BoardBucket + ".p.a", "$KV." + protocol.ServicesBucket + "." + protocol.ServicesAgentKey("agent-1"), "$JS.API.STREAM.INFO." + protocol.ServicesStream, "$JS.API.DIRECT.GET." + protocol.BoardStream,
		// nor write, read or cut the audit trail and its anchors
		protocol.AuditSubject, "$KV." + protocol.AuditAnchorsBucket + "." + protocol.AuditHeadKey, "$JS.API.STREAM.INFO." + protocol.AuditStream,
		"$JS.API.DIRECT.GET." + protocol.AuditStream, "$JS.API.STREAM.PURGE." + protocol.AuditStream, "$JS.API.STREAM.MSG.DELETE." + protocol.AuditStream} {
		_ = a1.Publish(subj, []byte("{}"))
		a1.Denied(t, "publish", subj)
	}
}
