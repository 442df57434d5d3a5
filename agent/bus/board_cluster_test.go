package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			winners []int
			codes   = map[string]int{}
			start   = make(chan struct{})
		)
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := c.Claim(ctx, p, "", "")
				mu.Lock()
				defer mu.Unlock()
				var be *protocol.BoardError
				switch {
				case err == nil:
					winners = append(winners, i)
				case errors.As(err, &be):
					codes[be.Code]++
				default:
					t.Errorf("agent-%d: %v", i+1, err)
				}
			}()
		}
		close(start)
		wg.Wait()
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
