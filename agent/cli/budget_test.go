package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The operator sees, raises and resets budgets from the CLI; bad input is
// refused naming the rule.
func TestBudgetCommand(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(2))
	e := &flockEnv{f: f, env: map[string]string{"FLOCK_NATS_URL": f.URL, "FLOCK_NKEY_FILE": f.SeedFile(t, protocol.OperatorUser)}}
	gw, err := ledger.NewBus(f.Connect(t, protocol.GatewayUser), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	adm, _ := gw.Reserve(ctx, "agent-1", ledger.Budget{Tokens: 1000, Window: protocol.WindowDay}, 1200)
	gw.Settle(adm.Reservation, 1100)
	adm, _ = gw.Reserve(ctx, "agent-2", ledger.Budget{}, 50)
	gw.Settle(adm.Reservation, 40)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := gw.Drain(dctx); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := e.run(t, "budget")
	today := time.Now().UTC().Format("2006-01-02")
	if code != cli.ExitOK || !strings.Contains(out, "agent-1  1100   1000") || !strings.Contains(out, "day "+today) || !strings.Contains(out, "agent-2  40     none") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = e.run(t, "budget", "raise", "agent-1", "500")
	if code != cli.ExitOK || !strings.Contains(out, "1500 (500 raised)") || !strings.Contains(out, "400") {
		t.Errorf("raise: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = e.run(t, "budget", "--json", "reset", "agent-1")
	var got protocol.LedgerEntry
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &got) != nil || got.Spent != 0 || got.Raised != 0 || got.By != "operator" {
		t.Errorf("reset: exit %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"budget", "raise", "agent-1", "-5"}, cli.ExitUsage, "TOKENS must be a positive whole number"},
		{[]string{"budget", "raise", "agent-1"}, cli.ExitUsage, "usage: flock-agent budget"},
		{[]string{"budget", "reset", "Agent_1"}, cli.ExitUsage, "is not an agent ID"},
		{[]string{"budget", "raise", "agent-2", "5"}, cli.ExitUsage, "has no budget to raise: set flock:agents[].gateway.budgetTokens"},
		{[]string{"budget", "reset", "agent-7"}, cli.ExitUnknownAgent, "no ledger entry"},
	} {
		if code, _, errOut := e.run(t, c.args...); code != c.code || !strings.Contains(errOut, c.err) {
			t.Errorf("%v: exit %d %q, want %d and %q", c.args, code, errOut, c.code, c.err)
		}
	}
}
