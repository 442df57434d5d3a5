package audit

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Who did it comes from the subject; a subject naming no agent of the
// flock, or a body that cannot be read where the entry needs it, makes no
// entry; the gateway's routine ledger writes make none either.
func TestDeriveTakesWhoFromTheSubject(t *testing.T) {
	d := deriver{isAgent: func(id string) bool { return id == "agent-1" || id == "agent-2" }, ledger: map[string]ledgerState{}}
	requeued := nats.Header{}
	requeued.Set(protocol.HeaderPoolSeq, "7")
	traced := nats.Header{}
	traced.Set(protocol.HeaderTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for _, c := range []struct {
		subject string
		h       nats.Header
		body    string
		want    *protocol.AuditEntry
	}{
		{"tasks.agent-1", nil, `{"id":"t1","stdin":"secret"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: "agent-1", What: "t1"}},
		{"tasks.agent-1", traced, `{"id":"t1"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: "agent-1", What: "t1", Trace: "4bf92f3577b34da6a3ce929d0e0e4736"}},
		{"task.result.agent-1", nil, `{"task_id":"t1","status":"ok","trace":"4bf92f3577b34da6a3ce929d0e0e4736"}`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditTaskResult, What: "t1", Outcome: "ok", Trace: "4bf92f3577b34da6a3ce929d0e0e4736"}},
		{"task.result.agent-1", nil, `{"task_id":"t1","status":"ok","trace":"not a trace, a message"}`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditTaskResult, What: "t1", Outcome: "ok"}},
		{"tasks.pool", nil, `{"id":"t2"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: "pool", What: "t2"}},
		{"tasks.pool", requeued, `{"id":"t2"}`, &protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: "pool", What: "t2", Outcome: "queued again"}},
		{"tasks.pool.agent-2", nil, `{"id":"t2"}`, &protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: "agent-2", What: "t2"}},
		{"task.result.agent-1", nil, `{"task_id":"t1","agent":"agent-2","status":"ok"}`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditTaskResult, What: "t1", Outcome: "ok"}},
		{"task.result.agent-9", nil, `{"task_id":"t1","status":"ok"}`, nil},
		{"task.result.agent-1", nil, `not json`, nil},
		{"agent.agent-2.inbox.agent-1", nil, `{"id":"m1","from":"operator","body":"x"}`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditMessage, Agent: "agent-2", What: "m1"}},
		{"agent.agent-2.inbox.operator", nil, `{"id":"m2"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditMessage, Agent: "agent-2", What: "m2"}},
		{"agent.agent-2.inbox.agent-9", nil, `{"id":"m3"}`, nil},
		{"agent.agent-1.usage", nil, `{"upstream":"anthropic","status":200,"total":42,"agent":"agent-2"}`, &protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditGatewayCall, Agent: "agent-1", What: "anthropic", Outcome: "200", Tokens: 42}},
		{"agent.agent-1.logs", nil, `{"lines":5}`, nil},
		{"board.events.p.a", nil, `{"plan":"p","id":"a","status":"claimed","holder":"agent-2","createdBy":"operator"}`, &protocol.AuditEntry{Who: "agent-2", Kind: protocol.AuditBoardChange, What: "p/a", Outcome: "claimed"}},
		{"board.operator.cancel", nil, `{}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBoardRequest, What: "cancel"}},
		{"broadcast", nil, `{"id":"b1","body":"x"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBroadcast, What: "b1"}},
		{"agent.agent-1.heartbeat", nil, `{}`, nil},
		// The ledger: a first charge makes none, a raise does, a charge after it none, a reset does.
		{"$KV.FLOCK_LEDGER.agent-1", nil, `{"agent":"agent-1","spent":10,"budget":100,"by":"gateway"}`, nil},
		{"$KV.FLOCK_LEDGER.agent-1", nil, `{"agent":"agent-1","spent":10,"budget":100,"raised":50,"by":"operator"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBudgetChange, Agent: "agent-1", Outcome: "budget 100 raised 50 epoch 0"}},
		{"$KV.FLOCK_LEDGER.agent-1", nil, `{"agent":"agent-1","spent":20,"budget":100,"raised":50,"by":"gateway"}`, nil},
		{"$KV.FLOCK_LEDGER.agent-1", nil, `{"agent":"agent-1","spent":0,"budget":100,"epoch":1,"by":"operator"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBudgetChange, Agent: "agent-1", Outcome: "budget 100 raised 0 epoch 1"}},
	} {
		got, ok := d.derive(c.subject, c.h, []byte(c.body))
		switch {
		case c.want == nil && ok:
			t.Errorf("%s %s: an entry %+v, want none", c.subject, c.body, got)
		case c.want != nil && !ok:
			t.Errorf("%s %s: no entry, want %+v", c.subject, c.body, *c.want)
		case c.want != nil && got != *c.want:
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.subject, c.body, got, *c.want)
		}
	}
}
