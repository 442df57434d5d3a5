package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// Mail that waits, on the real engine: messages to an agent whose container
// is stopped are queued by the bus, survive a restart of the bus's
// container, and are in the agent's inbox directory, in order, once its
// container starts again.
func TestMailWaitsForAStoppedAgent(t *testing.T) {
	skipUnderGVisor(t, notTheSandbox)
	f := needReplay(t, "stops an agent and the bus: replay only")
	a := f.agents[len(f.agents)-1]
	ctx := context.Background()
	if err := f.engine.Stop(ctx, container(a), 30); err != nil {
		t.Fatal(err)
	}
	stoppedAgent := true
	t.Cleanup(func() {
		if stoppedAgent {
			_ = f.engine.Start(context.Background(), container(a))
		}
	})
	cl := operatorClient(t)
	tag := fmt.Sprint(time.Now().UnixNano())
	var want []string
	for i := range 3 {
		body := fmt.Sprintf("waiting %s #%d", tag, i)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := cl.Send(sctx, a, protocol.Message{Body: body}, 500*time.Millisecond)
		cancel()
		if err != nil || r.Status != protocol.ReceiptQueued || r.Seq == 0 {
			t.Fatalf("message %d to %s (stopped): %+v %v; want queued", i, a, r, err)
		}
		want = append(want, body)
	}
	if err := f.engine.Restart(ctx, f.name+"-bus", 10); err != nil {
		t.Fatal(err)
	}
	if err := f.engine.Start(ctx, container(a)); err != nil {
		t.Fatal(err)
	}
	stoppedAgent = false
	dir := filepath.Join(f.sharedRoot, "agents", a, "inbox")
	var got []string
	testkit.WaitEvery(t, 90*time.Second, 100*time.Millisecond, a+"'s inbox to hold the operator's messages after its restart", func() bool {
		got = got[:0]
		files, _ := filepath.Glob(filepath.Join(dir, "*-inbox-*.json"))
		sort.Strings(files)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			var st struct {
				From    string
				Message protocol.Message
			}
			if json.Unmarshal(b, &st) == nil && st.From == protocol.OperatorUser && strings.HasPrefix(st.Message.Body, "waiting "+tag) {
				got = append(got, st.Message.Body)
			}
		}
		return len(got) >= len(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s's inbox after its restart and the bus's: %q, want %q", a, got, want)
	}
	if err := f.waitForHeartbeats(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
}
