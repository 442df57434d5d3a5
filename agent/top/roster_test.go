package top_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/top"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// dashboard is a State fed from a real bus as `top` feeds it: live items
// and ledger entries from the watch, looks on demand.
type dashboard struct {
	mu  sync.Mutex
	st  *top.State
	src *top.BusSource
}

func watch(t *testing.T, f *bustest.Bus) *dashboard {
	t.Helper()
	cl, err := operator.New(f.Connect(t, protocol.OperatorUser))
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{st: top.NewState(), src: &top.BusSource{Op: cl}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan struct{})
	go func() {
		_ = d.src.Watch(ctx, func(it operator.Item) {
			d.mu.Lock()
			d.st.Take(it, time.Now())
			d.mu.Unlock()
		}, func(e protocol.LedgerEntry) {
			d.mu.Lock()
			d.st.TakeBudget(e, time.Now())
			d.mu.Unlock()
		}, func() { close(ready) })
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the dashboard's watch did not start")
	}
	return d
}

// lookUntil looks until the rows are want (the watch may still be
// delivering what changed), and returns the last rows.
func (d *dashboard) lookUntil(t *testing.T, first bool, want []string) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := d.look(t, first)
		if slices.Equal(got, want) || time.Now().After(deadline) {
			return got
		}
		first = false
		time.Sleep(50 * time.Millisecond)
	}
}

// look applies one look and returns the rows' IDs.
func (d *dashboard) look(t *testing.T, first bool) []string {
	t.Helper()
	l := d.src.Look(context.Background(), first)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.st.Apply(l, time.Now())
	var ids []string
	for _, a := range d.st.Rows("agent", "", time.Now()) {
		ids = append(ids, a.ID)
	}
	return ids
}

// A flock of 50 redeployed as one of 3, with `top` watching throughout and
// one started afterwards: both show agent-1 … agent-3 only, never the 47
// of the earlier deployment (silent for ever before).
func TestTheDashboardShowsOnlyTheCurrentAgents(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(50), bustest.WithoutServices())
	f.StoreHeartbeats(t, bustest.IDs(50)...)
	f.StoreLedgerEntries(t, 10, bustest.IDs(50)...)

	running := watch(t, f)
	if got := running.lookUntil(t, true, bustest.IDs(50)); !slices.Equal(got, bustest.IDs(50)) {
		t.Fatalf("before the redeploy: rows %v, want the 50 agents", got)
	}

	f.Rerender(t, bustest.Agents(3))
	want := bustest.IDs(3)
	if got := running.lookUntil(t, false, want); !slices.Equal(got, want) {
		t.Fatalf("the running dashboard after the redeploy: rows %v, want %v", got, want)
	}
	fresh := watch(t, f)
	if got := fresh.lookUntil(t, true, want); !slices.Equal(got, want) {
		t.Fatalf("a dashboard started after the redeploy: rows %v, want %v", got, want)
	}
	// A ledger entry of an ID the roster does not have (written after the
	// redeploy) gets no row.
	f.StoreLedgerEntries(t, 5, "agent-40")
	time.Sleep(200 * time.Millisecond) // the entry reaches the watch
	if got := fresh.look(t, false); !slices.Equal(got, want) {
		t.Fatalf("after a ledger entry of agent-40: rows %v, want %v", got, want)
	}
}
