package board_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// Artifacts pass between tasks through the board's store: the holder puts
// them, within its quota and the size limit; the agent holding a task that
// needs that task gets them, and so does the operator; nobody else learns
// they exist; they leave with their plan.
func TestArtifactsPassToTheTasksThatNeedThem(t *testing.T) {
	t.Parallel()
	e := start(t, 3)
	a1, a2, a3 := e.agent(t, "agent-1"), e.agent(t, "agent-2"), e.agent(t, "agent-3")
	e.apply(t, plan("p", prompt("build"), prompt("test", "build"), prompt("other")))
	out := []byte("binary bytes\x00\xff")

	// Only under a task one holds.
	_, err := a1.Put(ctxT(t), "p", "build", "out.bin", out)
	refused(t, err, protocol.BoardErrNotHolder)
	claim(t, a1, "p", "build")
	_, err = a2.Put(ctxT(t), "p", "build", "out.bin", out)
	refused(t, err, protocol.BoardErrNotHolder)
	_, err = a1.Put(ctxT(t), "p", "build", "../escape", out)
	refused(t, err, protocol.BoardErrInvalid)
	_, err = a1.Put(ctxT(t), "p", "build", "big", make([]byte, protocol.ArtifactBytes+1))
	refused(t, err, protocol.BoardErrLimit)
	art := must[*protocol.BoardArtifact](t)(a1.Put(ctxT(t), "p", "build", "out.bin", out))
	if art.Size != len(out) || art.By != "agent-1" || art.Digest == "" {
		t.Fatalf("put: %+v", art)
	}
	// Its putter reads it back; a peer holding nothing that needs it is
	// told it does not exist.
	if got, _, err := a1.Get(ctxT(t), "p", "build", "out.bin"); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("the putter's get: %q %v", got, err)
	}
	_, _, err = a2.Get(ctxT(t), "p", "build", "out.bin")
	refused(t, err, protocol.BoardErrNotFound)
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "build", protocol.BoardResult{Summary: "built", Artifacts: []string{"out.bin"}}))

	// agent-2 claims test (which needs build): it may read build's artifact;
	// agent-3, holding a task that does not need it, may not.
	claim(t, a2, "p", "test")
	claim(t, a3, "p", "other")
	if got, a, err := a2.Get(ctxT(t), "p", "build", "out.bin"); err != nil || !bytes.Equal(got, out) || a.By != "agent-1" {
		t.Fatalf("the dependent's get: %q %+v %v", got, a, err)
	}
	_, _, err = a3.Get(ctxT(t), "p", "build", "out.bin")
	refused(t, err, protocol.BoardErrNotFound)
	if got, _, err := e.op.Get(ctxT(t), "p", "build", "out.bin"); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("the operator's get: %q %v", got, err)
	}
	_, _, err = e.op.Get(ctxT(t), "p", "build", "nothing")
	refused(t, err, protocol.BoardErrNotFound)
	_, err = e.op.Put(ctxT(t), "p", "build", "x", out)
	refused(t, err, protocol.BoardErrForbidden)

	// A share per agent, all its artifacts told, each charged what it costs
	// the store (more than its data: 15 of 256 KiB fit a 4 MiB share, not
	// 16); replacing one counts once.
	chunk := make([]byte, protocol.ArtifactBytes)
	n := 0
	for ; n < 20; n++ {
		if _, err := a2.Put(ctxT(t), "p", "test", "part-"+string(rune('a'+n)), chunk); err != nil {
			if be := refused(t, err, protocol.BoardErrLimit); !strings.Contains(be.Msg, "over its share of 4194304") {
				t.Fatalf("past the share: %v", be)
			}
			break
		}
	}
	if want := protocol.ArtifactQuota(3)/protocol.ArtifactBytes - 1; n != want {
		t.Fatalf("%d artifacts of 256 KiB fit agent-2's share, want %d", n, want)
	}
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "test", "part-a", chunk)) // a replacement fits

	// The plan goes, and its artifacts with it.
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "test", protocol.BoardResult{}))
	must[*protocol.BoardTask](t)(a3.Complete(ctxT(t), "p", "other", protocol.BoardResult{}))
	must[[]protocol.BoardChange](t)(e.op.Remove(ctxT(t), "p"))
	_, _, err = e.op.Get(ctxT(t), "p", "build", "out.bin")
	refused(t, err, protocol.BoardErrNotFound)
	// Nothing left of them in the store: not even the markers a delete
	// leaves (a plan's artifacts removed, its markers purged).
	st, err := bustest.JetStream(t, e.nc).Stream(ctxT(t), protocol.ArtifactStream)
	if err != nil {
		t.Fatal(err)
	}
	if state := st.CachedInfo().State; state.Msgs != 0 || state.Bytes != 0 {
		t.Fatalf("the store after the plan's removal: %d messages, %d bytes", state.Msgs, state.Bytes)
	}
}

// Five agents each fill their share: every one gets all of it (the shares
// fit the store together: no agent at its bound takes another's room), and
// a dependent's get and the operator's still answer at once.
func TestNoAgentTakesAnothersShareOfTheStore(t *testing.T) {
	t.Parallel()
	const agents = 5
	e := start(t, agents)
	var specs []protocol.BoardTaskSpec
	for i := 1; i <= agents; i++ {
		specs = append(specs, protocol.BoardTaskSpec{ID: fmt.Sprintf("t%d", i), Prompt: "p", Assignee: fmt.Sprintf("agent-%d", i)})
	}
	specs = append(specs, protocol.BoardTaskSpec{ID: "after", Prompt: "p", Needs: []string{"t1"}, Assignee: "agent-2"})
	e.apply(t, plan("p", specs...))
	share := protocol.ArtifactQuota(agents)
	chunk := make([]byte, protocol.ArtifactBytes)
	var a1 *board.Client
	for i := 1; i <= agents; i++ {
		id := fmt.Sprintf("agent-%d", i)
		c := e.agent(t, id)
		if i == 1 {
			a1 = c
		}
		claim(t, c, "p", fmt.Sprintf("t%d", i))
		n := 0
		for ; ; n++ {
			if _, err := c.Put(ctxT(t), "p", fmt.Sprintf("t%d", i), fmt.Sprintf("f%d", n), chunk); err != nil {
				if be := refused(t, err, protocol.BoardErrLimit); !strings.Contains(be.Msg, "over its share") {
					t.Fatalf("%s's put %d: %v (refused for the store, not its share)", id, n, be)
				}
				break
			}
		}
		if want := share/protocol.ArtifactBytes - 1; n != want {
			t.Fatalf("%s put %d artifacts of 256 KiB in its share of %d, want %d", id, n, share, want)
		}
	}
	must[*protocol.BoardTask](t)(a1.Complete(ctxT(t), "p", "t1", protocol.BoardResult{}))
	a2 := e.agent(t, "agent-2")
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "t2", protocol.BoardResult{}))
	claim(t, a2, "p", "after")
	if got, _, err := a2.Get(ctxT(t), "p", "t1", "f0"); err != nil || len(got) != protocol.ArtifactBytes {
		t.Fatalf("the dependent's get with every share full: %d bytes, %v", len(got), err)
	}
	if _, _, err := e.op.Get(ctxT(t), "p", "t3", "f0"); err != nil {
		t.Fatalf("the operator's get with every share full: %v", err)
	}
}

// What a put is charged is never below what the store counts for it (its
// stream's bytes), nor far above: an empty artifact, a small one, one of a
// chunk, of a chunk and a byte, the largest; and a name at its longest.
func TestArtifactCostIsWhatTheStoreCounts(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	a1 := e.agent(t, "agent-1")
	task := strings.Repeat("t", 64)
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: task, Prompt: "p"}))
	claim(t, a1, "p", task)
	js := bustest.JetStream(t, e.nc)
	bytesNow := func() int {
		st, err := js.Stream(ctxT(t), protocol.ArtifactStream)
		if err != nil {
			t.Fatal(err)
		}
		return int(st.CachedInfo().State.Bytes)
	}
	for i, size := range []int{0, 1, 1000, 128 << 10, 128<<10 + 1, protocol.ArtifactBytes} {
		name := fmt.Sprintf("%02d-%s", i, strings.Repeat("n", 60))
		before := bytesNow()
		if _, err := a1.Put(ctxT(t), "p", task, name, make([]byte, size)); err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		real := bytesNow() - before
		charged := board.ArtifactCost(protocol.ArtifactObject("p", task, name), "agent-1", size)
		t.Logf("%d bytes: the store counts %d, the board charges %d", size, real, charged)
		if charged < real || charged > real+256 {
			t.Errorf("an artifact of %d bytes: charged %d, the store counts %d", size, charged, real)
		}
	}
}

// An agent keeps at most its count of artifacts: empty ones cost the
// store too, and past the count it is refused, naming the bound.
func TestArtifactsAreCountedAsWellAsWeighed(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	a1, a2 := e.agent(t, "agent-1"), e.agent(t, "agent-2")
	e.apply(t, plan("p", protocol.BoardTaskSpec{ID: "a", Prompt: "p", Assignee: "agent-1"}, protocol.BoardTaskSpec{ID: "b", Prompt: "p", Assignee: "agent-2"}))
	claim(t, a1, "p", "a")
	claim(t, a2, "p", "b")
	n := 0
	for ; n < protocol.ArtifactQuotaObjects+5; n++ {
		if _, err := a1.Put(ctxT(t), "p", "a", fmt.Sprintf("e%d", n), nil); err != nil {
			if be := refused(t, err, protocol.BoardErrLimit); !strings.Contains(be.Msg, fmt.Sprintf("keeps %d artifacts, its bound", protocol.ArtifactQuotaObjects)) {
				t.Fatalf("past the count: %v", be)
			}
			break
		}
	}
	if n != protocol.ArtifactQuotaObjects {
		t.Fatalf("%d empty artifacts kept, want the bound of %d", n, protocol.ArtifactQuotaObjects)
	}
	// Its replacing one of them still passes; agent-2 is not touched.
	must[*protocol.BoardArtifact](t)(a1.Put(ctxT(t), "p", "a", "e0", []byte("again")))
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "b", "x", []byte("mine")))
}
