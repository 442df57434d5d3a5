package bus_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// An agent subscribing to its own inbox without end would grow the bus's
// memory for everyone: past protocol.MaxSubscriptions on one connection
// the bus refuses each new subscription, saying so; those it holds still
// deliver, and agent-2 goes on.
func TestAnAgentsSubscriptionsAreBounded(t *testing.T) {
	t.Parallel()
	f, _, _, a2 := startTwoAgents(t)
	refused := make(chan error, 64)
	nc, err := f.Dial(t, "agent-1", nats.CustomInboxPrefix(protocol.InboxPrefix("agent-1")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case refused <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject := func(i int) string { return fmt.Sprintf("%s.s%d", protocol.InboxPrefix("agent-1"), i) }
	subs := map[int]*nats.Subscription{}
	for i := range protocol.MaxSubscriptions + 16 {
		if subs[i], err = nc.SubscribeSync(subject(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	select {
	case err := <-refused:
		if !errors.Is(err, nats.ErrMaxSubscriptionsExceeded) {
			t.Fatalf("the bus said %v, want maximum subscriptions exceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%d subscriptions on one connection: none refused", protocol.MaxSubscriptions+16)
	}
	for _, i := range []int{0, protocol.MaxSubscriptions - 1, protocol.MaxSubscriptions + 15} {
		if err := a2.Publish(subject(i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_ = a2.Flush()
	for _, tc := range []struct {
		i    int
		want bool
	}{{0, true}, {protocol.MaxSubscriptions - 1, true}, {protocol.MaxSubscriptions + 15, false}} {
		_, err := subs[tc.i].NextMsg(time.Second)
		if (err == nil) != tc.want {
			t.Errorf("subscription %d: delivered %v, want %v", tc.i, err == nil, tc.want)
		}
	}
	if !nc.IsConnected() || !a2.IsConnected() {
		t.Fatal("a connection was lost")
	}
}
