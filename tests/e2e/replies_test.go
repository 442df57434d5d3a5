package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// agent-1, from inside its container with its own key, gives JetStream's
// answer to a pull of its own mailbox a reply subject of agent-2's
// (deleting its mailbox or task consumer through the JetStream API,
// writing into its task queue or ledger entry): the bus closes each such
// connection, and agent-2 keeps its mailbox and consumer and still runs
// its tasks.
func TestHostileReplySubjects(t *testing.T) {
	_, a1, a2 := needTwo(t)
	_, js, rs := jsResults(t)
	targets := []string{
		"$JS.API.STREAM.DELETE." + protocol.MailStream(a2),
		"$JS.API.CONSUMER.DELETE." + protocol.StreamTasks + "." + protocol.AgentConsumer(a2),
		protocol.TaskSubject(a2),
		"$KV." + protocol.LedgerBucket + "." + a2,
	}
	out := mustFail(t, a1, append([]string{"reply-redirect", "nats://bus:4222", protocol.ContainerCredsFile}, targets...)...)
	t.Logf("agent-1: %s", strings.TrimSpace(out))
	if n := strings.Count(out, `"closed":true`); n != len(targets) || strings.Count(out, "reply subject") != len(targets) {
		t.Errorf("%d of %d connections closed naming the reply subject: %s", n, len(targets), out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, protocol.MailStream(a2)); err != nil {
		t.Errorf("agent-2's mailbox: %v", err)
	}
	if _, err := js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(a2)); err != nil {
		t.Errorf("agent-2's task consumer: %v", err)
	}
	after := taskID(t, "after-replies")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(after, "still runs"))
	got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[after]) > 0 })
	if r := got[after][0]; r.Agent != a2 || !r.OK() || strings.TrimSpace(r.Stdout) != "still runs" {
		t.Errorf("agent-2's task after the attack: %+v", r)
	}
}
