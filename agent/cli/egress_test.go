package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/protocol/egress"
)

// The trail's egress entries add up per agent and host; refusals are kept
// (newest first, each once, at most a few) and become the rules that would
// have allowed them, which pass the same check as the operator's config.
func TestEgressUseAddsUpAndSuggests(t *testing.T) {
	var u egressUse
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for i, e := range []protocol.AuditEntry{
		{Agent: "agent-1", What: "github.com:443", Requests: 3, Sent: 100, Received: 9000},
		{Agent: "agent-1", What: "github.com:443", Requests: 2, Refused: 1, Refusal: "POST /acme/site/git-receive-pack"},
		{Agent: "agent-1", What: "github.com:443", Refused: 1, Refusal: "POST /acme/site/git-receive-pack"},
		{Agent: "agent-2", What: "pkgs.example.com:8443", Refused: 1, Refusal: "CONNECT"},
		{Agent: "agent-2", What: "(invalid: 9000 bytes)", Refused: 1, Refusal: "(invalid: 9000 bytes)"},
	} {
		e.Kind, e.Time = protocol.AuditEgress, t0.Add(time.Duration(i)*time.Minute)
		u.add(e)
	}
	if len(u.rows) != 3 {
		t.Fatalf("%d rows, want 3", len(u.rows))
	}
	r := u.rows[0]
	if r.Connections != 3 || r.Requests != 5 || r.Refused != 2 || r.Sent != 100 || r.Received != 9000 || len(r.Refusals) != 1 || !r.Last.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("agent-1 github.com: %+v", r)
	}
	sug := u.suggestions()
	if len(sug) != 2 {
		t.Fatalf("suggestions %+v", sug)
	}
	b, _ := json.Marshal(sug)
	for _, want := range []string{`"host":"github.com"`, `"POST /acme/site/*"`, `"agents":["agent-1"]`, `"host":"pkgs.example.com","port":8443`, `"GET /"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("suggestions lack %s: %s", want, b)
		}
	}
	if _, errs := egress.Check(sug, egress.Context{Key: "flock:gateway.egress", Agents: []string{"agent-1", "agent-2"}}); errs != nil {
		t.Errorf("a suggestion does not pass the config's check: %v", errs)
	}
	var out bytes.Buffer
	u.print(IO{Out: &out})
	if !strings.Contains(out.String(), "refused: agent-1 github.com:443 POST /acme/site/git-receive-pack") || !strings.Contains(out.String(), "AGENT") {
		t.Errorf("print:\n%s", out.String())
	}
}

// Each egress ledger entry is named by the rule it is for: an exact host's
// and a *. rule's above the host used, found again from the hosts in the
// trail; one for another agent or a rule used only before the period keeps
// its ledger key; --agent leaves the others' out.
func TestEgressBudgetsNamedByTheirRule(t *testing.T) {
	var u egressUse
	for _, e := range []protocol.AuditEntry{
		{Agent: "agent-1", What: "github.com:443"},
		{Agent: "agent-1", What: "files.pythonhosted.org:443"},
		{Agent: "agent-2", What: "github.com:443"},
	} {
		e.Kind = protocol.AuditEgress
		u.add(e)
	}
	reset := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	entries := []protocol.LedgerEntry{
		{Agent: protocol.EgressLedgerKey("agent-1", "github.com:443"), Window: protocol.WindowDay, Spent: 700, Budget: 1000, Reset: reset},
		{Agent: protocol.EgressLedgerKey("agent-1", "*.pythonhosted.org:443"), Spent: 5, Budget: 10, Raised: 10},
		{Agent: protocol.EgressLedgerKey("agent-1", "old.example.com:443"), Spent: 1, Budget: 2},
		{Agent: protocol.EgressLedgerKey("agent-2", "*.github.com:443"), Spent: 3, Budget: 4},
	}
	u.addBudgets(entries, "")
	want := []string{"github.com:443", "*.pythonhosted.org:443", entries[2].Agent, entries[3].Agent}
	if len(u.budgets) != len(want) {
		t.Fatalf("budgets %+v", u.budgets)
	}
	for i, b := range u.budgets {
		if b.Rule != want[i] {
			t.Errorf("budget %d named %q, want %q", i, b.Rule, want[i])
		}
	}
	if b := u.budgets[1]; b.Agent != "agent-1" || b.Limit != 20 || b.Spent != 5 {
		t.Errorf("raised budget: %+v", b)
	}
	var out bytes.Buffer
	u.print(IO{Out: &out})
	if !strings.Contains(out.String(), "budget: agent-1 github.com:443: 700 of 1000 bytes (day, until 2026-12-08T00:00:00Z)") {
		t.Errorf("print:\n%s", out.String())
	}
	b, _ := json.Marshal(u)
	if !strings.Contains(string(b), `"budgets":[{"agent":"agent-1","rule":"github.com:443"`) || !strings.Contains(string(b), `"hosts":[{"agent":"agent-1"`) {
		t.Errorf("json: %s", b)
	}
	var one egressUse
	one.rows = u.rows
	one.addBudgets(entries, "agent-2")
	if len(one.budgets) != 1 || one.budgets[0].Agent != "agent-2" {
		t.Errorf("--agent agent-2: %+v", one.budgets)
	}
}
