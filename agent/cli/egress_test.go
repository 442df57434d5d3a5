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
