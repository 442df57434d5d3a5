package board_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// agents connects agent-1 … agent-n, each on its own connection.
func (e *env) agents(t testing.TB, n int) []*board.Client {
	t.Helper()
	out := make([]*board.Client, n)
	for i := range out {
		out[i] = e.agent(t, fmt.Sprintf("agent-%d", i+1))
	}
	return out
}

// race has every client claim at once and returns the tasks won and the
// refusals' codes.
func race(t testing.TB, clients []*board.Client, p string) (won []protocol.BoardTask, codes map[string]int) {
	t.Helper()
	reps, errs := testkit.AtOnce(len(clients), func(i int) (*protocol.BoardReply, error) {
		return clients[i].Claim(ctxT(t), p, "", "")
	})
	passed, codes := testkit.Refusals(t, errs)
	for _, i := range passed {
		won = append(won, *reps[i].Task)
	}
	return won, codes
}

// 50 agents claim the one ready task at once, 20 times over: each time
// exactly one wins, and every other is told there is nothing for it.
func TestFiftyAgentsRaceForOneTask(t *testing.T) {
	t.Parallel()
	e := start(t, 50)
	clients := e.agents(t, 50)
	for round := range 20 {
		p := fmt.Sprintf("round-%d", round)
		e.apply(t, plan(p, prompt("prize")))
		won, codes := race(t, clients, p)
		if len(won) != 1 || codes[protocol.BoardErrNothing] != 49 {
			t.Fatalf("round %d: %d winners %v, refusals %v", round, len(won), ids(won), codes)
		}
		task := e.status(t, p, "prize", protocol.BoardClaimed)
		if task.Holder != won[0].Holder || task.Attempts != 1 {
			t.Fatalf("round %d: the board says %+v, the winner %+v", round, task, won[0])
		}
		var n int
		fmt.Sscanf(task.Holder, "agent-%d", &n)
		must[*protocol.BoardTask](t)(clients[n-1].Complete(ctxT(t), p, "prize", protocol.BoardResult{})) // its slot free again
	}
}

// 50 agents race for 50 tasks: each gets one, no task is given twice.
func TestFiftyAgentsShareFiftyTasks(t *testing.T) {
	t.Parallel()
	e := start(t, 50)
	clients := e.agents(t, 50)
	var specs []protocol.BoardTaskSpec
	for i := range 50 {
		specs = append(specs, prompt(fmt.Sprintf("t%02d", i)))
	}
	e.apply(t, plan("p", specs...))
	won, codes := race(t, clients, "p")
	if len(won) != 50 || len(codes) != 0 {
		t.Fatalf("%d won, refusals %v", len(won), codes)
	}
	holders, tasks := map[string]bool{}, map[string]bool{}
	for _, w := range won {
		if holders[w.Holder] || tasks[w.ID] {
			t.Fatalf("given twice: %+v", w)
		}
		holders[w.Holder], tasks[w.ID] = true, true
	}
	if n := len(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p", protocol.BoardClaimed))); n != 50 {
		t.Fatalf("%d claimed on the board", n)
	}
}

// Two agents complete a task's last two needs at once, 30 times over, on a
// board whose sweeper does not run: once both replies are back, the task
// is ready (the completions promoted it, once: no ready event twice).
func TestConcurrentCompletionsPromoteTheirDependent(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	f := bustest.Start(t, bustest.Agents(2), bustest.WithBoard(board.Options{Now: clk.Now, SweepEvery: time.Hour, AgentRate: 1e4, AgentInFlight: 256}))
	nc := f.Connect(t, protocol.OperatorUser)
	e := &env{f: f, clk: clk, op: board.NewOperatorClient(nc), nc: nc}
	clients := e.agents(t, 2)
	events := listen(t, nc, protocol.SubjectBoardEvents)
	for round := range 30 {
		p := fmt.Sprintf("round-%d", round)
		e.apply(t, plan(p, prompt("a"), prompt("b"), prompt("c", "a", "b")))
		claim(t, clients[0], p, "a")
		claim(t, clients[1], p, "b")
		done := []string{"a", "b"}
		_, errs := testkit.AtOnce(len(done), func(i int) (*protocol.BoardTask, error) {
			return clients[i].Complete(ctxT(t), p, done[i], protocol.BoardResult{})
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("complete %s: %v", done[i], err)
			}
		}
		e.status(t, p, "c", protocol.BoardReady)
	}
	// Every event of a round's c: blocked when applied, ready once.
	readies := map[string]int{}
	for {
		select {
		case m := <-events:
			var task protocol.BoardTask
			if err := json.Unmarshal(m.Data, &task); err != nil {
				t.Fatal(err)
			}
			if task.ID == "c" && task.Status == protocol.BoardReady {
				readies[task.Plan]++
			}
			continue
		case <-time.After(200 * time.Millisecond):
		}
		break
	}
	for round := range 30 {
		if p := fmt.Sprintf("round-%d", round); readies[p] != 1 {
			t.Errorf("%s.c became ready %d times", p, readies[p])
		}
	}
}

// One agent sends 30 claims at once, holding nothing, with a claim limit
// of 2, and then 30 adds at once with an add quota of 5: the board's
// workers answer them side by side, and still exactly 2 claims and 5 adds
// pass.
func TestOneAgentsConcurrentClaimsAndAddsKeepItsLimits(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	e.setBoard(t, func(c *protocol.BoardConfig) {
		setAgent(c, protocol.BoardAgent{ID: "agent-1", ClaimLimit: 2, AddQuota: quota(5)})
	})
	var specs []protocol.BoardTaskSpec
	for i := range 10 {
		specs = append(specs, prompt(fmt.Sprintf("t%d", i)))
	}
	e.apply(t, plan("p", specs...))
	// Every call refused is refused for the limit: each passed the rest.
	limited := func(errs []error) int {
		t.Helper()
		passed, codes := testkit.Refusals(t, errs)
		if codes[protocol.BoardErrLimit] != len(errs)-len(passed) {
			t.Fatalf("refusals %v, want only %q", codes, protocol.BoardErrLimit)
		}
		return len(passed)
	}
	reps, errs := testkit.AtOnce(30, func(int) (*protocol.BoardReply, error) {
		return a1.Claim(ctxT(t), "p", "", "")
	})
	claims := limited(errs)
	var held []string
	for i, rep := range reps {
		if errs[i] == nil {
			held = append(held, rep.Task.ID)
		}
	}
	if n := len(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p", protocol.BoardClaimed))); claims != 2 || n != 2 {
		t.Fatalf("%d claims passed, %d tasks claimed on the board; the limit is 2", claims, n)
	}
	_, errs = testkit.AtOnce(30, func(i int) (*protocol.BoardTask, error) {
		return a1.Add(ctxT(t), "p", held[i%2], prompt(fmt.Sprintf("s%d", i)))
	})
	adds := limited(errs)
	if n := len(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p"))); adds != 5 || n != 15 {
		t.Fatalf("%d adds passed, %d tasks on the board; the quota is 5", adds, n)
	}
}
