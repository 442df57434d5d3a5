package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

var capped = ledger.Budget{Tokens: 1000}

func newBus(t *testing.T, nc *nats.Conn) *ledger.Bus {
	t.Helper()
	l, err := ledger.NewBus(nc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// entry reads agent's entry as the operator sees it.
// gatewayBus runs the test in parallel on a bus of its own with the given
// agents, and is a gateway's ledger on that bus.
func gatewayBus(t *testing.T, agents int) (*bustest.Bus, *ledger.Bus) {
	t.Helper()
	t.Parallel() // each test has its own bus
	f := bustest.Start(t, bustest.Agents(agents))
	return f, newBus(t, f.Connect(t, protocol.GatewayUser))
}

func entry(t *testing.T, f *bustest.Bus, agent string) protocol.LedgerEntry {
	t.Helper()
	kv, err := ledger.Bucket(context.Background(), bustest.JetStream(t, f.Connect(t, protocol.OperatorUser)))
	if err != nil {
		t.Fatal(err)
	}
	all, err := ledger.List(context.Background(), kv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Agent == agent {
			return e
		}
	}
	return protocol.LedgerEntry{}
}

func drain(t *testing.T, l *ledger.Bus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two gateways (two connections as the gateway's user) share one ledger:
// what one charged, the other sees; a gateway made again (a restart)
// continues from the total; a call whose gateway died before it settled
// stays charged its bound.
func TestBusLedgerIsSharedAndSurvives(t *testing.T) {
	t.Parallel() // each test has its own bus
	f := bustest.Start(t, bustest.Agents(2))
	ctx := context.Background()
	g1 := newBus(t, f.Connect(t, protocol.GatewayUser))
	adm, err := g1.Reserve(ctx, "agent-1", capped, 600)
	if err != nil || !adm.OK {
		t.Fatalf("%+v %v", adm, err)
	}
	g1.Settle(adm.Reservation, 450)
	drain(t, g1)
	if e := entry(t, f, "agent-1"); e.Spent != 450 || e.Budget != 1000 || e.By != "gateway" {
		t.Fatalf("entry after one call: %+v", e)
	}
	// A second gateway: its first call is charged on top.
	g2 := newBus(t, f.Connect(t, protocol.GatewayUser))
	adm2, err := g2.Reserve(ctx, "agent-1", capped, 560)
	if err != nil || !adm2.OK || adm2.Used != 450 {
		t.Fatalf("second gateway: %+v %v", adm2, err)
	}
	// ...and it dies before it settles: the bound stays charged, so the
	// first gateway (which last saw 450) refuses the next call.
	if adm, err := g1.Reserve(ctx, "agent-1", capped, 1); err != nil || adm.OK || adm.Used != 1010 {
		t.Errorf("after a dead gateway's reservation: %+v %v, want refused at 1010", adm, err)
	}
	if e := entry(t, f, "agent-1"); e.Spent != 1010 {
		t.Errorf("entry %+v, want the dead call's bound charged (1010)", e)
	}
	// A gateway made again on a new connection continues from there.
	g3 := newBus(t, f.Connect(t, protocol.GatewayUser))
	if adm, err := g3.Reserve(ctx, "agent-1", capped, 1); err != nil || adm.OK || adm.Used != 1010 {
		t.Errorf("a restarted gateway: %+v %v, want refused at 1010", adm, err)
	}
	// A new gateway is not slower to refuse an agent it has not seen: it
	// reads the entry before its first reservation.
	if adm, err := g3.Reserve(ctx, "agent-2", capped, 10); err != nil || !adm.OK || adm.Used != 0 {
		t.Errorf("agent-2's first call: %+v %v", adm, err)
	}
}

// 40 calls at once through two gateways at 995 of 1,000 tokens: one is
// admitted, whichever gateway carries it.
func TestBusLedgerRaceAcrossGateways(t *testing.T) {
	t.Parallel() // each test has its own bus
	f := bustest.Start(t, bustest.Agents(1))
	ctx := context.Background()
	gws := []*ledger.Bus{newBus(t, f.Connect(t, protocol.GatewayUser)), newBus(t, f.Connect(t, protocol.GatewayUser))}
	adm, _ := gws[0].Reserve(ctx, "agent-1", capped, 995)
	gws[0].Settle(adm.Reservation, 995)
	drain(t, gws[0])
	admitted := testkit.CountAtOnce(t, 40, func(i int) (bool, error) {
		adm, err := gws[i%2].Reserve(ctx, "agent-1", capped, 200)
		return adm.OK, err
	})
	if admitted != 1 {
		t.Errorf("%d of 40 admitted, want 1", admitted)
	}
	if e := entry(t, f, "agent-1"); e.Spent != 1195 {
		t.Errorf("spent or reserved %d, want 995 + one bound of 200", e.Spent)
	}
}

// Without the bus a call of an agent with a cap is refused (ErrUnavailable),
// never admitted unmetered; an agent without a cap is admitted, and its cost
// is written once the bus is back.
func TestBusLedgerFailsClosed(t *testing.T) {
	t.Parallel() // each test has its own bus
	f := bustest.Start(t, bustest.Agents(2))
	nc := f.Connect(t, protocol.GatewayUser, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	l := newBus(t, nc)
	f.Bus.Shutdown()
	ctx := context.Background()
	start := time.Now()
	if adm, err := l.Reserve(ctx, "agent-1", capped, 10); !errors.Is(err, ledger.ErrUnavailable) || adm.OK {
		t.Errorf("bus down, capped agent: %+v %v, want ErrUnavailable", adm, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	adm, err := l.Reserve(ctx, "agent-2", ledger.Budget{}, 10)
	if err != nil || !adm.OK {
		t.Fatalf("bus down, agent without a cap: %+v %v", adm, err)
	}
	l.Settle(adm.Reservation, 7)
	f.RestartBus(t)
	drain(t, l)
	if e := entry(t, f, "agent-2"); e.Spent != 7 {
		t.Errorf("agent-2's cost after the bus came back: %+v", e)
	}
}

// The operator raises and resets; a call in flight across a reset is
// charged its cost in the new period. Raising an agent without a budget is
// refused, naming the config key.
func TestOperatorRaisesAndResets(t *testing.T) {
	f, g := gatewayBus(t, 2)
	ctx := context.Background()
	kv, err := ledger.Bucket(ctx, bustest.JetStream(t, f.Connect(t, protocol.OperatorUser)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := g.Reserve(ctx, "agent-1", capped, 1000)
	if b, _ := g.Reserve(ctx, "agent-1", capped, 1); b.OK {
		t.Fatal("admitted over the budget")
	}
	if _, err := ledger.Raise(ctx, kv, "agent-1", 500, time.Now()); err != nil {
		t.Fatal(err)
	}
	// The gateway reads an entry that refuses again once it is a second
	// old: the raise is in force within about a second.
	raised := time.Now()
	for {
		b, err := g.Reserve(ctx, "agent-1", capped, 1)
		if err == nil && b.OK && b.Limit == 1500 {
			break
		}
		if time.Since(raised) > 3*time.Second {
			t.Fatalf("3 s after a raise of 500: %+v %v", b, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the raise was in force after %v", time.Since(raised).Round(time.Millisecond))
	e, err := ledger.Reset(ctx, kv, "agent-1", time.Now())
	if err != nil || e.Spent != 0 || e.Raised != 0 || e.By != "operator" {
		t.Fatalf("reset: %+v %v", e, err)
	}
	g.Settle(a.Reservation, 30) // reserved before the reset
	drain(t, g)
	if e := entry(t, f, "agent-1"); e.Spent != 30 {
		t.Errorf("after the reset, a call reserved before it: spent %d, want its cost 30", e.Spent)
	}
	b, _ := g.Reserve(ctx, "agent-2", ledger.Budget{}, 5) // no cap
	g.Settle(b.Reservation, 5)
	drain(t, g)
	if _, err := ledger.Raise(ctx, kv, "agent-2", 5, time.Now()); err == nil || !strings.Contains(err.Error(), "flock:agents[].gateway.budgetTokens") {
		t.Errorf("raising an agent without a budget: %v", err)
	}
	if _, err := ledger.Raise(ctx, kv, "agent-9", 5, time.Now()); !errors.Is(err, ledger.ErrNoEntry) {
		t.Errorf("raising an agent with no entry: %v", err)
	}
	if _, err := ledger.Reset(ctx, kv, "../x", time.Now()); err == nil {
		t.Error("a key that is no agent ID was accepted")
	}
}

// Only the gateway and the operator may write the ledger: an agent can
// neither put its own entry nor read another's.
func TestAgentsCannotTouchTheLedger(t *testing.T) {
	f, g := gatewayBus(t, 2)
	ctx := context.Background()
	adm, _ := g.Reserve(ctx, "agent-1", capped, 900)
	g.Settle(adm.Reservation, 900)
	drain(t, g)
	a1 := f.Connect(t, "agent-1")
	js := bustest.JetStream(t, a1)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := js.KeyValue(cctx, protocol.LedgerBucket); err == nil {
		t.Error("agent-1 bound the ledger's bucket")
	}
	// A raw put with a zero spend, as a JetStream publish and as a plain one.
	body := []byte(`{"v":1,"agent":"agent-1","epoch":9,"spent":0}`)
	if _, err := js.Publish(cctx, "$KV."+protocol.LedgerBucket+".agent-1", body); err == nil {
		t.Error("agent-1 wrote its ledger entry")
	}
	a1.Publish("$KV."+protocol.LedgerBucket+".agent-1", body)
	a1.Flush()
	time.Sleep(200 * time.Millisecond)
	if e := entry(t, f, "agent-1"); e.Spent != 900 {
		t.Errorf("agent-1's entry after its writes: %+v", e)
	}
}

// A bucket deleted and made again (revisions start over) neither wedges nor
// crashes a gateway that knew the old one: its next write reads the new
// bucket, and an entry it knew as over the limit is read again.
func TestBusLedgerSurvivesABucketMadeAgain(t *testing.T) {
	f, g := gatewayBus(t, 1)
	ctx := context.Background()
	for range 3 {
		adm, _ := g.Reserve(ctx, "agent-1", capped, 400)
		g.Settle(adm.Reservation, 400)
	}
	drain(t, g)
	if adm, _ := g.Reserve(ctx, "agent-1", capped, 1); adm.OK {
		t.Fatal("admitted at 1,200 of 1,000")
	}
	js := bustest.JetStream(t, f.Connect(t, protocol.OperatorUser))
	if err := js.DeleteKeyValue(ctx, protocol.LedgerBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: protocol.LedgerBucket, History: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // what this gateway knows is now more than a second old
	if e := g.Known("agent-1", capped); e.Spent != 0 {
		t.Errorf("known after the bucket was made again: %+v", e)
	}
	if adm, err := g.Reserve(ctx, "agent-1", capped, 10); err != nil || !adm.OK || adm.Used != 0 {
		t.Errorf("a reservation in the new bucket: %+v %v", adm, err)
	}
}

// An egress rule's byte budget lives in the same bucket under a key of its
// own (egress.<agent>.<rule>), which the gateway's bus user may write: the
// bytes are reserved a chunk at a time down to what is left, then refused.
func TestBusLedgerKeepsEgressBudgets(t *testing.T) {
	f, l := gatewayBus(t, 2)
	ctx := context.Background()
	key := protocol.EgressLedgerPrefix + "agent-1.0011223344556677"
	b := ledger.Budget{Tokens: 100, Window: protocol.WindowDay}
	first, err := l.ReserveUpTo(ctx, key, b, 60, 1)
	if err != nil || !first.OK || first.Bound != 60 {
		t.Fatalf("first chunk: %+v %v", first, err)
	}
	second, err := l.ReserveUpTo(ctx, key, b, 60, 1)
	if err != nil || !second.OK || second.Bound != 40 {
		t.Fatalf("second chunk: %+v %v, want the 40 left", second, err)
	}
	if third, err := l.ReserveUpTo(ctx, key, b, 60, 1); err != nil || third.OK {
		t.Fatalf("past the budget: %+v %v", third, err)
	}
	l.Settle(first.Reservation, 60)
	l.Settle(second.Reservation, 25)
	drain(t, l)
	if e := entry(t, f, key); e.Spent != 85 || e.Budget != 100 || e.Window != protocol.WindowDay {
		t.Fatalf("the bucket holds %+v, want 85 of 100 bytes spent today", e)
	}
}
