package mcpserver_test

import (
	"slices"
	"testing"

	"github.com/ai-flock/ai-flock/agent/mcpserver"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// The operator's list_agents, called through the official MCP client,
// names the flock's agents now: agent-1 … agent-3 of a topology that
// replaced one of 50 whose every agent's heartbeat was stored.
func TestListAgentsNamesOnlyTheCurrentAgents(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(50), bustest.WithoutServices())
	f.StoreHeartbeats(t, bustest.IDs(50)...)
	f.Rerender(t, bustest.Agents(3))

	op := operatorClient(t, f.Connect(t, protocol.OperatorUser))
	out := call[mcpserver.ListAgentsOut](t, op, "list_agents", nil)
	var got []string
	for _, a := range out.Agents {
		got = append(got, a.ID)
		if a.Last == nil || !a.InTopology {
			t.Errorf("%s: its stored heartbeat or its consumer is missing: %+v", a.ID, a)
		}
	}
	if want := bustest.IDs(3); !slices.Equal(got, want) {
		t.Fatalf("list_agents named %v, want %v", got, want)
	}
}
