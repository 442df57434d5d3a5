package board

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// A board whose requests wait with no worker taking one reports how long
// (the services' health reads it); one a worker took reports nothing, and
// the lanes are served in turn: a caller with many requests waiting does
// not go before one with a single request.
func TestAdmissionStallsAndTurns(t *testing.T) {
	a := newAdmission(Options{AgentRate: 1000, AgentBurst: 1000, AgentInFlight: 8})
	t0 := time.Now()
	if n, d := a.stalled(t0); n != 0 || d != 0 {
		t.Fatalf("nothing waits: stalled %d for %s", n, d)
	}
	for i := range 5 {
		if why, _, _ := a.admit("agent-1", &nats.Msg{Subject: "one", Reply: string(rune('a' + i))}, t0); why != queued {
			t.Fatalf("agent-1's request %d: %v", i, why)
		}
	}
	if why, _, _ := a.admit("agent-2", &nats.Msg{Subject: "two"}, t0); why != queued {
		t.Fatalf("agent-2's request: %v", why)
	}
	if why, _, _ := a.admit(protocol.OperatorUser, &nats.Msg{Subject: "op"}, t0); why != queued {
		t.Fatalf("the operator's request: %v", why)
	}
	if n, d := a.stalled(t0.Add(20 * time.Second)); n != 7 || d != 20*time.Second {
		t.Fatalf("7 requests waiting 20 s with no worker: stalled %d for %s", n, d)
	}
	var order []string
	for range 3 {
		m, ln, ok := a.next()
		if !ok {
			t.Fatal("no request")
		}
		order = append(order, m.Subject)
		a.done(ln)
	}
	if got := order[0] + "," + order[1] + "," + order[2]; got != "one,two,op" {
		t.Fatalf("served %s, want each lane in turn: one,two,op", got)
	}
	if n, d := a.stalled(time.Now()); n != 4 || d > time.Second {
		t.Fatalf("after a worker took one: stalled %d for %s", n, d)
	}
	a.stop()
	for range 4 {
		if _, _, ok := a.next(); !ok {
			t.Fatal("stopped with requests waiting: they are answered first")
		}
	}
	if _, _, ok := a.next(); ok {
		t.Fatal("stopped and empty: next still gives a request")
	}
}
