package e2e

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/protocol"
)

// Attacks a hostile agent makes from inside its container with its own key.

// agent-1 floods its own result subject with twice its share of the store:
// agent-2's stored results survive and agent-2 still stores new ones.
func TestHostileResultsFlood(t *testing.T) {
	f := need(t)
	a1, a2 := f.agents[0], f.agents[1]
	nc, js := jsClient(t)
	rs := watchResults(t, nc)
	before := taskID(t, "before")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(before, "kept"))
	rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[before]) > 0 })

	// Twice agent-1's share of the store, whatever the flock under test
	// declares (the replay sets 8 MiB; a deployed default flock more).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	share := func(id string) uint64 {
		s, err := js.Stream(ctx, protocol.ResultsStream(id))
		if err != nil {
			t.Fatal(err)
		}
		return uint64(s.CachedInfo().Config.MaxBytes)
	}
	floodMiB := 2 * share(a1) >> 20
	start := time.Now()
	out := mustSucceed(t, a1, "flood-results", "nats://bus:4222", "/etc/flock/nats.nk", strconv.FormatUint(floodMiB, 10))
	t.Logf("agent-1: %s (%d MiB against a %d MiB share) in %s", strings.TrimSpace(out), floodMiB, share(a1)>>20, time.Since(start).Round(time.Millisecond))

	after := taskID(t, "after")
	publish(t, js, protocol.TaskSubject(a2), taskEcho(after, "still stored"))
	got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[after]) > 0 })
	if len(got[before]) == 0 || got[before][0].Agent != a2 {
		t.Fatalf("agent-2's result stored before agent-1's flood is gone")
	}
	for _, id := range []string{a1, a2} {
		s, err := js.Stream(ctx, protocol.ResultsStream(id))
		if err != nil {
			t.Fatal(err)
		}
		st, limit := s.CachedInfo().State, uint64(s.CachedInfo().Config.MaxBytes)
		if st.Bytes > limit {
			t.Errorf("%s's results stream holds %d bytes, over its %d", id, st.Bytes, limit)
		}
		t.Logf("%s's results stream: %d KiB in %d messages (share %d MiB)", id, st.Bytes>>10, st.Msgs, limit>>20)
	}
}

// agent-1 watches the pool consumer's info and claims the pool task it sees
// handed out; the operator counts only the result with the task's nonce.
func TestHostileForgedPoolResult(t *testing.T) {
	f := need(t)
	a1 := f.agents[0]
	nc, _ := jsClient(t)
	cl, err := operator.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		out string
		err error
	}
	forged := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := fut.engine.Exec(ctx, container(a1), []string{f.probe[a1], "forge-pool", "nats://bus:4222", "/etc/flock/nats.nk"}, "AGENT_ID="+a1)
		if err == nil && r.ExitCode != 0 {
			err = errors.New("exit " + strconv.Itoa(r.ExitCode))
		}
		forged <- outcome{r.Stdout + r.Stderr, err}
	}()
	time.Sleep(time.Second) // the forger is watching
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var reported []protocol.Result
	res, err := cl.RunChecked(ctx, operator.Target{Pool: true}, taskExec(taskID(t, "pool"), "sleep", "2s"), nil,
		func(r protocol.Result) { reported = append(reported, r) })
	if err != nil {
		t.Fatal(err)
	}
	fo := <-forged
	if fo.err != nil {
		t.Fatalf("the forger: %v: %s", fo.err, fo.out)
	}
	t.Logf("agent-1: %s", strings.TrimSpace(fo.out))
	if len(res) != 1 || !res[0].OK() || res[0].Stdout == "forged" {
		t.Fatalf("results %+v: want the one real result", res)
	}
	if len(reported) == 0 || reported[0].Agent != a1 || reported[0].Stdout != "forged" {
		t.Fatalf("forged results reported: %+v", reported)
	}
	t.Logf("real result from %s; forged one from %s ignored", res[0].Agent, reported[0].Agent)
}
