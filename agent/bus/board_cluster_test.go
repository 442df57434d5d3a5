package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// On a three-node bus the services, connected to every node, serve the
// board from the replicated bucket: agents spread over the nodes race for
// one task, and exactly one wins, every round.
func TestTheBoardOnAClusteredBus(t *testing.T) {
	testkit.SkipInShort(t, "slow: a three-node bus; make check runs it")
	const agents, rounds = 12, 10
	f := bustest.StartCluster(t, bustest.Agents(agents))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := f.URL
	clients := make([]*board.Client, agents)
	for i := range clients {
		f.URL = f.Nodes[i%len(f.Nodes)].URL() // agent i asks node i%3
		id := fmt.Sprintf("agent-%d", i+1)
		clients[i] = board.NewAgentClient(f.Connect(t, id), id)
	}
	f.URL = url
	op := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	for round := range rounds {
		p := fmt.Sprintf("r%d", round)
		if _, err := op.Apply(ctx, protocol.BoardPlan{Plan: p, Tasks: []protocol.BoardTaskSpec{{ID: "prize", Prompt: "x"}}}); err != nil {
			t.Fatal(err)
		}
		_, errs := testkit.AtOnce(len(clients), func(i int) (*protocol.BoardReply, error) {
			return clients[i].Claim(ctx, p, "", "")
		})
		winners, codes := testkit.Refusals(t, errs)
		// A node whose view lags may see the task ready and lose the
		// write (conflict), or already see it claimed (nothing).
		if len(winners) != 1 || codes[protocol.BoardErrNothing]+codes[protocol.BoardErrNotReady]+codes[protocol.BoardErrConflict] != agents-1 {
			t.Fatalf("round %d: winners %v, refusals %v", round, winners, codes)
		}
		if _, err := clients[winners[0]].Complete(ctx, p, "prize", protocol.BoardResult{}); err != nil {
			t.Fatal(err)
		}
	}
}
