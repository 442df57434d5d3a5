package mcpserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// operatorClient serves the operator's tools on nc (a connection as the
// operator) and returns a client of them.
func operatorClient(t *testing.T, nc *nats.Conn) *mcp.ClientSession {
	t.Helper()
	cl, err := operator.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o, err := mcpserver.NewOperator(ctx, cl, "test")
	if err != nil {
		t.Fatal(err)
	}
	return client(t, o.Server)
}

func TestOperatorServerDrivesTheFlock(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 2)
	op := operatorClient(t, tf.f.Connect(t, protocol.OperatorUser))
	if got, want := toolNames(t, op), []string{"board_apply", "board_cancel", "board_get_artifact", "board_list", "board_remove_plan", "board_retry", "board_show", "broadcast", "budgets", "dead_letters", "list_agents", "recent_events", "run_task", "send"}; !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}

	t.Run("run_task", func(t *testing.T) {
		one := call[mcpserver.RunTaskOut](t, op, "run_task", map[string]any{"agent": "agent-2", "kind": "echo", "args": []string{"hello"}})
		if !one.Complete || len(one.Results) != 1 || one.Results[0].Agent != "agent-2" || !one.Results[0].OK() || !strings.Contains(one.Results[0].Stdout, "hello") {
			t.Fatalf("agent-2: %+v", one)
		}
		pool := call[mcpserver.RunTaskOut](t, op, "run_task", map[string]any{"pool": true, "kind": "echo", "args": []string{"p"}})
		if !pool.Complete || len(pool.Results) != 1 || !pool.Results[0].OK() {
			t.Fatalf("pool: %+v", pool)
		}
		all := call[mcpserver.RunTaskOut](t, op, "run_task", map[string]any{"all": true, "kind": "echo", "args": []string{"a"}})
		var who []string
		for _, r := range all.Results {
			who = append(who, r.Agent)
		}
		slices.Sort(who)
		if !all.Complete || !slices.Equal(who, []string{"agent-1", "agent-2"}) {
			t.Fatalf("all: %+v", all)
		}
	})

	t.Run("list_agents", func(t *testing.T) {
		out := call[mcpserver.ListAgentsOut](t, op, "list_agents", nil)
		if len(out.Agents) != 2 || out.Agents[0].ID != "agent-1" || out.Agents[0].Last == nil || out.Agents[1].Last == nil {
			t.Fatalf("agents %+v", out)
		}
	})

	t.Run("send and recent_events", func(t *testing.T) {
		r := call[protocol.Receipt](t, op, "send", map[string]any{"to": "agent-1", "body": "from the operator"})
		var st worker.Stored
		readJSON(t, filepath.Join(tf.shared, "agents", "agent-1", r.File), &st)
		if st.From != protocol.OperatorUser || st.Message.Body != "from the operator" || r.From != protocol.OperatorUser {
			t.Fatalf("receipt %+v, stored %+v", r, st)
		}
		ev := call[mcpserver.RecentEventsOut](t, op, "recent_events", map[string]any{"agent": "agent-1", "type": protocol.EventInbox, "wait_seconds": 5})
		found := false
		for _, e := range ev.Events {
			found = found || (e.Ref == r.ID && e.Detail == r.File && e.Agent == "agent-1")
		}
		if !found {
			t.Fatalf("no inbox event for %s in %+v", r.ID, ev)
		}
		// The cursor moves on: nothing newer of that kind.
		if again := call[mcpserver.RecentEventsOut](t, op, "recent_events", map[string]any{"agent": "agent-1", "type": protocol.EventInbox, "after": ev.Next}); len(again.Events) != 0 {
			t.Fatalf("after the cursor: %+v", again)
		}
	})

	t.Run("broadcast", func(t *testing.T) {
		b := call[mcpserver.BroadcastOut](t, op, "broadcast", map[string]any{"body": "all hands"})
		for _, id := range []string{"agent-1", "agent-2"} {
			ev := call[mcpserver.RecentEventsOut](t, op, "recent_events", map[string]any{"agent": id, "type": protocol.EventBroadcast, "wait_seconds": 5})
			if len(ev.Events) == 0 || ev.Events[len(ev.Events)-1].Ref != b.ID {
				t.Fatalf("%s: broadcast %s not stored: %+v", id, b.ID, ev)
			}
		}
	})

	t.Run("dead_letters", func(t *testing.T) {
		if out := call[mcpserver.DeadLettersOut](t, op, "dead_letters", nil); len(out.DeadLetters) != 0 {
			t.Fatalf("dead letters in a healthy flock: %+v", out)
		}
	})

	// Budgets are read here, never changed: the ledger's entries as the
	// gateway wrote them (made here by the gateway's own ledger code).
	t.Run("budgets", func(t *testing.T) {
		gw, err := ledger.NewBus(tf.f.Connect(t, protocol.GatewayUser), nil)
		if err != nil {
			t.Fatal(err)
		}
		adm, err := gw.Reserve(context.Background(), "agent-1", ledger.Budget{Tokens: 500, Window: protocol.WindowMonth}, 120)
		if err != nil || !adm.OK {
			t.Fatalf("%+v %v", adm, err)
		}
		gw.Settle(adm.Reservation, 100)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := gw.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		out := call[mcpserver.BudgetsOut](t, op, "budgets", nil)
		if len(out.Budgets) != 1 || out.Budgets[0].Agent != "agent-1" || out.Budgets[0].Spent != 100 || out.Budgets[0].Limit != 500 ||
			out.Budgets[0].Left != 400 || out.Budgets[0].Window != "month" || out.Budgets[0].StartsOver == nil {
			t.Fatalf("budgets %+v", out)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		callFails(t, op, "run_task", map[string]any{"kind": "echo"}, "agent: give exactly one")
		callFails(t, op, "run_task", map[string]any{"agent": "agent-1", "pool": true, "kind": "echo"}, "agent: give exactly one")
		callFails(t, op, "run_task", map[string]any{"agent": "agent-1"}, "command: required")
		callFails(t, op, "run_task", map[string]any{"agent": "agent-9", "kind": "echo"}, "agent-9")
		callFails(t, op, "run_task", map[string]any{"agent": "agent-1", "command": "x", "timeout_seconds": -1}, "timeout_seconds:")
		callFails(t, op, "run_task", map[string]any{"agent": "agent-1", "command": "x", "env": map[string]any{"1BAD": "v"}}, "env")
		callFails(t, op, "send", map[string]any{"to": "agent-1"}, "body:")
		callFails(t, op, "send", map[string]any{"to": "agent-9", "body": "x"}, `no such agent: the bus keeps no mailbox for "agent-9"`)
		callFails(t, op, "broadcast", map[string]any{}, "body:")
		callFails(t, op, "recent_events", map[string]any{"max": 5000}, "max:")
		callFails(t, op, "dead_letters", map[string]any{"max": 1000}, "max:")
	})
}

// The operator's server as an MCP client on the operator's machine starts
// it: `flock-agent mcp --operator` with the key in $FLOCK_NKEY_SEED.
func TestOperatorServerOverStdio(t *testing.T) {
	t.Parallel()
	tf := startFlock(t, 1)
	seed, err := os.ReadFile(tf.f.SeedFile(t, protocol.OperatorUser))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "mcp", "--operator", "--nats", tf.f.URL)
	cmd.Env = []string{"FLOCK_MCP_TEST_CLI=1", "FLOCK_NKEY_SEED=" + strings.TrimSpace(string(seed))}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "assistant", Version: "v0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out := call[mcpserver.RunTaskOut](t, cs, "run_task", map[string]any{"agent": "agent-1", "kind": "echo", "args": []string{"via", "stdio"}})
	if !out.Complete || len(out.Results) != 1 || !strings.Contains(out.Results[0].Stdout, "via stdio") {
		t.Fatalf("run_task: %+v", out)
	}
}
