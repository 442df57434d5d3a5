package board_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
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

	// A quota per agent, all its artifacts told; replacing one counts once.
	chunk := make([]byte, protocol.ArtifactBytes)
	n := 0
	for ; (n+1)*protocol.ArtifactBytes <= protocol.ArtifactQuotaBytes; n++ {
		must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "test", "part-"+string(rune('a'+n)), chunk))
	}
	_, err = a2.Put(ctxT(t), "p", "test", "one-more", chunk)
	if be := refused(t, err, protocol.BoardErrLimit); !strings.Contains(be.Msg, "over its quota") {
		t.Fatalf("past the quota: %v", be)
	}
	must[*protocol.BoardArtifact](t)(a2.Put(ctxT(t), "p", "test", "part-a", chunk)) // a replacement fits

	// The plan goes, and its artifacts with it.
	must[*protocol.BoardTask](t)(a2.Complete(ctxT(t), "p", "test", protocol.BoardResult{}))
	must[*protocol.BoardTask](t)(a3.Complete(ctxT(t), "p", "other", protocol.BoardResult{}))
	must[[]protocol.BoardChange](t)(e.op.Remove(ctxT(t), "p"))
	_, _, err = e.op.Get(ctxT(t), "p", "build", "out.bin")
	refused(t, err, protocol.BoardErrNotFound)
}
