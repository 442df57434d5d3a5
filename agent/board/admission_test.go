package board_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The admission's bounds, at their defaults: an agent past its rate, or
// with its bound of requests in flight, is refused at once, the refusal
// naming the bound; the operator is not touched; the agent is served again
// once it slows down.
func TestAnAgentsRequestsAreBounded(t *testing.T) {
	t.Parallel()
	e := startWith(t, 2, board.Options{})
	nc := e.f.Connect(t, "agent-1")
	e.apply(t, plan("p", prompt("a")))
	// In flight: requests sent at once, nobody reading the answers until
	// all are sent, so that more than the bound wait at once.
	inbox := protocol.InboxPrefix("agent-1") + ".bound"
	sub, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	const n = board.DefaultAgentBurst
	for i := range n {
		if err := nc.PublishRequest(protocol.BoardAgentSubject("agent-1", protocol.BoardOpList), fmt.Sprintf("%s.%d", inbox, i), []byte(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	codes := map[string]int{}
	var why string
	for range n {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("after %v: %v (every request is answered: served, or refused while within the refusals' allowance)", codes, err)
		}
		var rep protocol.BoardReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatal(err)
		}
		codes[rep.Code]++
		if rep.Code == protocol.BoardErrBusy {
			why = rep.Error
		}
	}
	if codes[""] < board.DefaultAgentInFlight || codes[protocol.BoardErrBusy] == 0 || codes[""]+codes[protocol.BoardErrBusy] != n {
		t.Fatalf("%d requests at once: %v, want at least %d served and the rest refused for the bound", n, codes, board.DefaultAgentInFlight)
	}
	if !strings.Contains(why, fmt.Sprintf("agent-1 has %d requests waiting or being answered, its bound", board.DefaultAgentInFlight)) {
		t.Errorf("the refusal %q does not name the bound", why)
	}
	// Rate: one at a time, past the burst within a second.
	ask := func() protocol.BoardReply {
		t.Helper()
		m, err := nc.Request(protocol.BoardAgentSubject("agent-1", protocol.BoardOpShow), []byte(`{"v":1,"plan":"p","task":"a"}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep protocol.BoardReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	time.Sleep(2 * time.Second) // the bucket full again
	var rateWhy string
	served := 0
	for range 3 * board.DefaultAgentBurst {
		rep := ask()
		if rep.Code != "" {
			if rep.Code != protocol.BoardErrBusy {
				t.Fatalf("refused %q (%s), want %s", rep.Error, rep.Code, protocol.BoardErrBusy)
			}
			rateWhy = rep.Error
			break
		}
		served++
	}
	if !strings.Contains(rateWhy, fmt.Sprintf("agent-1 is over its %d requests a second to the board", board.DefaultAgentRate)) || served < board.DefaultAgentBurst {
		t.Fatalf("%d requests in a row: %d served, then %q; want the burst of %d served, then the rate named", 3*board.DefaultAgentBurst, served, rateWhy, board.DefaultAgentBurst)
	}
	// Another agent and the operator are served meanwhile.
	if _, err := e.agent(t, "agent-2").Show(ctxT(t), "p", "a"); err != nil {
		t.Fatalf("agent-2 refused while agent-1 is past its rate: %v", err)
	}
	e.show(t, "p", "a")
	// The client waits a busy refusal out: it asks again after a pause.
	cl := e.agent(t, "agent-1")
	start := time.Now()
	for range 2 * board.DefaultAgentBurst {
		if _, err := cl.Show(ctxT(t), "p", "a"); err != nil {
			t.Fatalf("agent-1's client past its rate: %v (it should pause and ask again)", err)
		}
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("%d requests through the client in %s: the rate did not hold", 2*board.DefaultAgentBurst, took)
	}
}

// An agent floods the board with list requests, as fast as its connection
// takes them, with a reply subject nobody listens on, while the board holds
// 50 tasks with prompts at their largest (a whole list about 800 KiB): an
// agent's replies are pages of at most protocol.BoardAgentPageBytes, its
// requests past its bounds are refused without being served, and meanwhile
// agent-2 claims and completes a task within a few seconds and the
// operator's apply passes. Before the admission, the flood's requests
// queued ahead of everyone's (the subscription's one queue), each served
// whole.
func TestAFloodingAgentDoesNotHoldTheBoard(t *testing.T) {
	testkit.SkipInShort(t, "slow: a flood of seconds; make check runs it")
	t.Parallel()
	e := startWith(t, 2, board.Options{})
	big := strings.Repeat("x", protocol.MaxBoardPrompt-100)
	var specs []protocol.BoardTaskSpec
	for i := range 50 {
		specs = append(specs, protocol.BoardTaskSpec{ID: fmt.Sprintf("big-%d", i), Prompt: big, Assignee: "agent-1"})
	}
	e.apply(t, plan("heavy", specs...))

	// A page, as agent-1 is sent it.
	nc := e.f.Connect(t, "agent-1")
	m, err := nc.Request(protocol.BoardAgentSubject("agent-1", protocol.BoardOpList), []byte(`{"v":1}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var page protocol.BoardReply
	if err := json.Unmarshal(m.Data, &page); err != nil {
		t.Fatal(err)
	}
	if len(m.Data) > protocol.BoardAgentPageBytes || page.Next == "" || len(page.Tasks) == 0 || len(page.Tasks) == 50 {
		t.Fatalf("a list of 50 tasks of 16 KiB: a reply of %d bytes with %d tasks, next %q: want a page of at most %d bytes and more to follow",
			len(m.Data), len(page.Tasks), page.Next, protocol.BoardAgentPageBytes)
	}

	stop := make(chan struct{})
	var sent atomic.Int64
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		reply := protocol.InboxPrefix("agent-1") + ".nobody"
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := nc.PublishRequest(protocol.BoardAgentSubject("agent-1", protocol.BoardOpList), reply, []byte(`{"v":1}`)); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	defer func() { close(stop); <-flooded }()
	time.Sleep(2 * time.Second) // the flood under way

	e.apply(t, plan("work", prompt("job")))
	good := e.agent(t, "agent-2")
	start := time.Now()
	got := claim(t, good, "work", "job")
	if _, err := good.Complete(ctxT(t), "work", got.ID, protocol.BoardResult{Summary: "ok"}); err != nil {
		t.Fatalf("agent-2's complete during the flood: %v", err)
	}
	took := time.Since(start)
	if _, err := e.op.Apply(ctxT(t), plan("later", prompt("x"))); err != nil {
		t.Fatalf("the operator's apply during the flood: %v", err)
	}
	t.Logf("agent-1 sent %d list requests; meanwhile agent-2 claimed and completed in %s", sent.Load(), took.Round(time.Millisecond))
	if sent.Load() < 10000 {
		t.Fatalf("agent-1 sent only %d requests: no flood to speak of", sent.Load())
	}
	if took > 3*time.Second {
		t.Fatalf("agent-2's claim and complete took %s during agent-1's flood", took)
	}
}

// Pages: every task exactly once, in order, each page within the agent's
// bound, Limit honoured, and a cursor that is not a page's next refused.
func TestListPages(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	var specs []protocol.BoardTaskSpec
	for i := range 30 {
		specs = append(specs, protocol.BoardTaskSpec{ID: fmt.Sprintf("t%02d", i), Prompt: strings.Repeat("p", 8<<10)})
	}
	e.apply(t, plan("p", specs...))
	nc := e.f.Connect(t, "agent-1")
	ask := func(req protocol.BoardRequest) (protocol.BoardReply, int) {
		t.Helper()
		req.V = protocol.Version
		body, _ := json.Marshal(req)
		m, err := nc.Request(protocol.BoardAgentSubject("agent-1", protocol.BoardOpList), body, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep protocol.BoardReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatal(err)
		}
		return rep, len(m.Data)
	}
	var seen []string
	pages := 0
	for req := (protocol.BoardRequest{Plan: "p"}); ; pages++ {
		rep, n := ask(req)
		if n > protocol.BoardAgentPageBytes {
			t.Fatalf("page %d: %d bytes, over %d", pages, n, protocol.BoardAgentPageBytes)
		}
		for _, task := range rep.Tasks {
			if task.Prompt == "" {
				t.Fatalf("page %d: %s sent without its prompt, though a task fits a page", pages, task.ID)
			}
			seen = append(seen, task.ID)
		}
		if rep.Next == "" {
			break
		}
		req.After = rep.Next
	}
	if want := ids(must[[]protocol.BoardTask](t)(e.op.List(ctxT(t), "p"))); len(seen) != 30 || pages < 3 || fmt.Sprint(prefixed("p", seen)) != fmt.Sprint(want) {
		t.Fatalf("%d pages gave %v, want every task once in order: %v", pages, seen, want)
	}
	if all := must[[]protocol.BoardTask](t)(e.agent(t, "agent-1").List(ctxT(t), "p")); len(all) != 30 {
		t.Fatalf("the client's List gave %d tasks, want all 30 (it follows the pages)", len(all))
	}
	if rep, _ := ask(protocol.BoardRequest{Plan: "p", Limit: 7}); len(rep.Tasks) != 7 || rep.Next == "" {
		t.Fatalf("limit 7: %d tasks, next %q", len(rep.Tasks), rep.Next)
	}
	if rep, _ := ask(protocol.BoardRequest{Plan: "p", After: "not a cursor"}); rep.Code != protocol.BoardErrInvalid || !strings.Contains(rep.Error, "after:") {
		t.Fatalf("a bad cursor: %q (%s), want invalid naming after", rep.Error, rep.Code)
	}
}

func prefixed(p string, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = p + "." + id
	}
	return out
}
