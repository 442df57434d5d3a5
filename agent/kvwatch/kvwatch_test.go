package kvwatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/kvwatch"
)

// watcher plays a jetstream.KeyWatcher: the test feeds its updates.
type watcher struct{ updates chan jetstream.KeyValueEntry }

func (w watcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w watcher) Stop() error                             { return nil }

// entry is a KeyValueEntry with a key; Follow reads nothing else of it.
type entry struct {
	jetstream.KeyValueEntry
	key string
}

func (e entry) Key() string { return e.key }

// follow runs Follow over the updates given (then the watcher stops, unless
// ctx is to end it) and says what it saw: the keys and "loaded" in order,
// and its result.
func follow(t *testing.T, ctx context.Context, stop bool, updates ...jetstream.KeyValueEntry) ([]string, bool) {
	t.Helper()
	w := watcher{updates: make(chan jetstream.KeyValueEntry, len(updates))}
	for _, u := range updates {
		w.updates <- u
	}
	if stop {
		close(w.updates)
	}
	var seen []string
	done := make(chan bool, 1)
	go func() {
		done <- kvwatch.Follow(ctx, w, func(e jetstream.KeyValueEntry) { seen = append(seen, e.Key()) }, func() { seen = append(seen, "loaded") })
	}()
	select {
	case stopped := <-done:
		return seen, stopped
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return")
		return nil, false
	}
}

func TestFollowDeliversInOrderAndSaysLoadedOnce(t *testing.T) {
	seen, stopped := follow(t, context.Background(), true,
		entry{key: "a"}, entry{key: "b"}, nil, entry{key: "c"}, nil, entry{key: "d"})
	if want := []string{"a", "b", "loaded", "c", "d"}; !slices.Equal(seen, want) {
		t.Fatalf("saw %v, want %v", seen, want)
	}
	if !stopped {
		t.Fatal("a watcher that stopped while the context was live: Follow said it did not")
	}
}

func TestFollowEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	seen, stopped := follow(t, ctx, false, entry{key: "a"}, nil)
	if stopped || !slices.Equal(seen, []string{"a", "loaded"}) {
		t.Fatalf("ended by its context: stopped %v, saw %v", stopped, seen)
	}
}

func TestFollowWithoutLoaded(t *testing.T) {
	w := watcher{updates: make(chan jetstream.KeyValueEntry, 2)}
	w.updates <- nil
	w.updates <- entry{key: "a"}
	close(w.updates)
	var seen []string
	if !kvwatch.Follow(context.Background(), w, func(e jetstream.KeyValueEntry) { seen = append(seen, e.Key()) }, nil) || !slices.Equal(seen, []string{"a"}) {
		t.Fatalf("saw %v", seen)
	}
}
