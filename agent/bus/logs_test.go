package bus_test

import (
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// An agent's recent log lines are the operator's to ask for, and the
// agent's alone to answer: no agent asks for another's, or listens on
// another's logs subject to answer in its name; the gateway and the
// services ask for none.
func TestOnlyTheOperatorAsksAndOnlyTheAgentAnswersForLogs(t *testing.T) {
	t.Parallel()
	f, op, a1, a2 := startTwoAgents(t)

	// agent-1 listens on its own subject; the operator's request reaches it.
	got1 := listen(t, a1.Conn, protocol.LogsSubject("agent-1"))
	if err := op.Publish(protocol.LogsSubject("agent-1"), []byte(`{"lines":5}`)); err != nil {
		t.Fatal(err)
	}
	got(t, got1, "the operator's logs request to agent-1")

	// agent-2 may not listen on agent-1's subject (to answer in its name)...
	if _, err := a2.SubscribeSync(protocol.LogsSubject("agent-1")); err != nil {
		t.Fatal(err)
	}
	a2.Denied(t, "subscription", protocol.LogsSubject("agent-1"))
	if _, err := a2.SubscribeSync(protocol.SubjectLogs); err != nil {
		t.Fatal(err)
	}
	a2.Denied(t, "subscription", protocol.SubjectLogs)
	// ...nor ask for agent-1's lines, nor its own.
	for _, subj := range []string{protocol.LogsSubject("agent-1"), protocol.LogsSubject("agent-2")} {
		_ = a2.Publish(subj, []byte(`{}`))
		a2.Denied(t, "publish", subj)
	}
	nothing(t, got1, "agent-2 asked agent-1 for its logs")
	for _, user := range []string{protocol.GatewayUser, protocol.ServicesUser} {
		c := f.ConnectRecorded(t, user)
		_ = c.Publish(protocol.LogsSubject("agent-1"), []byte(`{}`))
		c.Denied(t, "publish", protocol.LogsSubject("agent-1"))
	}
	select {
	case m := <-got1:
		t.Fatalf("a logs request reached agent-1 from someone not the operator: %s", m.Data)
	case <-time.After(100 * time.Millisecond):
	}
}
