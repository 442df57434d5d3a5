package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
		{"task.result.agent-1", nil, `not json`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditTaskResult, Outcome: "(unreadable: 8 bytes)"}},
		{"agent.agent-2.inbox.agent-1", nil, `{"id":"m1","from":"operator","body":"x"}`, &protocol.AuditEntry{Who: "agent-1", Kind: protocol.AuditMessage, Agent: "agent-2", What: "m1"}},
		{"agent.agent-2.inbox.operator", nil, `{"id":"m2"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditMessage, Agent: "agent-2", What: "m2"}},
		{"agent.agent-2.inbox.operator.mail", nil, `{"id":"m4"}`, &protocol.AuditEntry{Who: "operator", Kind: protocol.AuditMessage, Agent: "agent-2", What: "m4"}},
		{"agent.agent-2.inbox.agent-1.mail", nil, `{"id":"m5"}`, nil},
		{"agent.agent-2.inbox.agent-9", nil, `{"id":"m3"}`, nil},
		{"agent.agent-1.usage", nil, `{"upstream":"anthropic","status":200,"total":42,"agent":"agent-2"}`, &protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditGatewayCall, Agent: "agent-1", What: "anthropic", Outcome: "200", Tokens: 42}},
		{"agent.agent-1.egress", nil, `{"host":"github.com:443","kind":"brokered","requests":4,"refused":1,"sent":300,"received":9000,"refusals":[{"method":"POST","path":"/a/b/git-receive-pack","why":"no rule"}]}`,
			&protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditEgress, Agent: "agent-1", What: "github.com:443", Outcome: "brokered", Requests: 4, Refused: 1, Sent: 300, Received: 9000,
				Refusal: "POST /a/b/git-receive-pack"}},
		{"agent.agent-1.egress", nil, `{"host":"x.example:443","kind":"refused","refused":1,"refusals":[{"method":"CONNECT","why":"no rule"}]}`,
			&protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditEgress, Agent: "agent-1", What: "x.example:443", Outcome: "refused", Refused: 1, Refusal: "CONNECT"}},
		{"agent.agent-9.egress", nil, `{"host":"github.com:443","kind":"brokered"}`, nil},
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
		got, _, ok := d.derive(c.subject, c.h, []byte(c.body))
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

// sealedLen is an entry's line once sealed at the largest sequence after
// a head: what it takes in the trail.
func sealedLen(e protocol.AuditEntry) int {
	e.Seq, e.Prev = 1<<63, strings.Repeat("f", 64)
	return len(e.Seal())
}

// Every field an entry takes from a body or a subject keeps the protocol's
// rule for it, or is kept as its length: at their largest valid values the
// fields are kept, past them (10 KB of characters JSON writes as six bytes)
// they are not, and either way the entry is under protocol.MaxAuditEntry.
// Each entry is charged to its sender's share.
func TestEveryFieldKeepsItsRuleAndTheEntryItsBound(t *testing.T) {
	a1 := "a" + strings.Repeat("b", 30) // the longest agent ID
	d := deriver{isAgent: func(id string) bool { return id == a1 || id == "agent-2" }, ledger: map[string]ledgerState{}}
	task := "T" + strings.Repeat("t", 127) // the longest task (and message) ID
	board := "B" + strings.Repeat("b", 63) // the longest board ID
	upstream := "u" + strings.Repeat("p", 30)
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := nats.Header{}
	traced.Set(protocol.HeaderTraceparent, "00-"+trace+"-00f067aa0ba902b7-01")
	huge := strings.Repeat("<", 10240)
	bad := "(invalid: 10240 bytes)"
	js := func(kv ...string) string {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, c := range []struct {
		subject string
		h       nats.Header
		body    string
		want    protocol.AuditEntry
		sender  string
	}{
		{"tasks." + a1, traced, js("id", task), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: a1, What: task, Trace: trace}, "operator"},
		{"tasks." + a1, nil, js("id", huge), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: a1, What: bad}, "operator"},
		{"tasks." + huge, nil, js("id", task), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditTaskSent, Agent: bad, What: task}, "operator"},
		{"tasks.pool." + a1, nil, js("id", huge), protocol.AuditEntry{Who: "bus", Kind: protocol.AuditTaskAssigned, Agent: a1, What: bad}, "services:" + a1},
		{"task.result." + a1, nil, js("task_id", task, "status", protocol.StatusRejected, "trace", trace), protocol.AuditEntry{Who: a1, Kind: protocol.AuditTaskResult, What: task, Outcome: protocol.StatusRejected, Trace: trace}, a1},
		{"task.result." + a1, nil, js("task_id", huge, "status", huge, "trace", huge), protocol.AuditEntry{Who: a1, Kind: protocol.AuditTaskResult, What: bad, Outcome: bad}, a1},
		{"task.result." + a1, nil, huge, protocol.AuditEntry{Who: a1, Kind: protocol.AuditTaskResult, Outcome: "(unreadable: 10240 bytes)"}, a1},
		{"agent.agent-2.inbox." + a1, nil, js("id", task), protocol.AuditEntry{Who: a1, Kind: protocol.AuditMessage, Agent: "agent-2", What: task}, a1},
		{"agent.agent-2.inbox." + a1, nil, js("id", huge), protocol.AuditEntry{Who: a1, Kind: protocol.AuditMessage, Agent: "agent-2", What: bad}, a1},
		{"agent.agent-2.inbox.operator", nil, js("id", huge), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditMessage, Agent: "agent-2", What: bad}, "operator"},
		{"broadcast", nil, js("id", huge), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBroadcast, What: bad}, "operator"},
		{"board.events." + board + "." + board, nil, js("holder", a1, "status", protocol.BoardCancelled), protocol.AuditEntry{Who: a1, Kind: protocol.AuditBoardChange, What: board + "/" + board, Outcome: protocol.BoardCancelled}, "services:" + a1},
		{"board.events." + huge + "." + huge, nil, js("holder", huge, "status", huge), protocol.AuditEntry{Who: bad, Kind: protocol.AuditBoardChange, What: bad + "/" + bad, Outcome: bad}, "operator"},
		{"board.events.p.t", nil, js("createdBy", "operator", "status", "ready"), protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBoardChange, What: "p/t", Outcome: "ready"}, "operator"},
		{"board.operator." + huge, nil, `{}`, protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBoardRequest, What: bad}, "operator"},
		{"agent." + a1 + ".usage", nil, `{"upstream":"` + upstream + `","status":-9223372036854775808,"total":-9223372036854775808,"trace":"` + trace + `"}`,
			protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditGatewayCall, Agent: a1, What: upstream, Outcome: "-9223372036854775808", Tokens: -9223372036854775808, Trace: trace}, "services:" + a1},
		{"agent." + a1 + ".usage", nil, js("upstream", huge, "trace", huge), protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditGatewayCall, Agent: a1, What: bad, Outcome: "0"}, "services:" + a1},
		// An egress record names whatever host the agent asked for: only a
		// name keeps it; negative counts are none.
		{"agent." + a1 + ".egress", nil, `{"host":"` + huge + `","kind":"` + huge + `","requests":-5,"sent":-9223372036854775808,"refusals":[{"method":"GET","path":"/` + huge + `"}]}`,
			protocol.AuditEntry{Who: "gateway", Kind: protocol.AuditEgress, Agent: a1, What: bad, Outcome: bad, Refusal: invalid("GET /" + huge)}, "services:" + a1},
		{"$KV.FLOCK_LEDGER." + a1, nil, `{"budget":-9223372036854775808,"raised":-9223372036854775808,"epoch":-9223372036854775808,"by":"operator"}`,
			protocol.AuditEntry{Who: "operator", Kind: protocol.AuditBudgetChange, Agent: a1, Outcome: "budget -9223372036854775808 raised -9223372036854775808 epoch -9223372036854775808"}, "operator"},
		{"$KV.FLOCK_LEDGER.agent-2", nil, `{"epoch":1,"by":"` + huge + `"}`, protocol.AuditEntry{Who: bad, Kind: protocol.AuditBudgetChange, Agent: "agent-2", Outcome: "budget 0 raised 0 epoch 1"}, "services:agent-2"},
	} {
		got, sender, ok := d.derive(c.subject, c.h, []byte(c.body))
		name := c.subject[:min(len(c.subject), 40)]
		if !ok || got != c.want || sender != c.sender {
			t.Errorf("%s: %v\n got %+v (charged to %q)\nwant %+v (charged to %q)", name, ok, got, sender, c.want, c.sender)
		}
		got.Time = time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -12*3600))
		got.Count, got.Total = -1<<63, -1<<63 // the writer's own fields at their widest
		if n := sealedLen(got); n > protocol.MaxAuditEntry {
			t.Errorf("%s: an entry of %d bytes, over %d", name, n, protocol.MaxAuditEntry)
		}
	}
}

// Whatever the subject and the body, the entry is under the bound and its
// fields keep their rules.
func FuzzDerive(f *testing.F) {
	for _, s := range []string{"tasks.agent-1", "tasks.pool", "tasks.pool.agent-1", "task.result.agent-1", "agent.agent-2.inbox.agent-1",
		"broadcast", "board.events.p.t", "board.operator.cancel", "agent.agent-1.usage", "$KV.FLOCK_LEDGER.agent-1"} {
		f.Add(s, `{"id":"t","task_id":"t","status":"ok","holder":"agent-1","upstream":"anthropic","epoch":1,"by":"operator"}`, "x")
	}
	f.Add("task.result.agent-1", `{"task_id":"`+strings.Repeat("\u2028", 4000)+`","status":"`+strings.Repeat("&", 4000)+`"}`, strings.Repeat("<", 5000))
	d := deriver{ledger: map[string]ledgerState{}}
	f.Fuzz(func(t *testing.T, subject, body, field string) {
		// The field goes in every place a body names something.
		b, _ := json.Marshal(map[string]any{"id": field, "task_id": field, "status": field, "trace": field, "holder": field,
			"createdBy": field, "upstream": field, "by": field, "epoch": len(field)})
		for _, data := range [][]byte{[]byte(body), b} {
			e, _, ok := d.derive(subject, nil, data)
			if !ok {
				continue
			}
			e.Time = time.Now()
			if n := sealedLen(e); n > protocol.MaxAuditEntry {
				t.Fatalf("%q %q: an entry of %d bytes: %+v", subject, data, n, e)
			}
			for _, s := range []string{e.Who, e.Agent, e.What, e.Outcome} {
				if strings.ContainsAny(s, "<>&\"\\\u2028") || strings.Contains(s, field) && len(field) > 200 {
					t.Fatalf("%q: a field keeps what the body said: %q", subject, s)
				}
			}
		}
	})
}
