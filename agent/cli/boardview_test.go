package cli

import (
	"testing"

	"github.com/ai-flock/ai-flock/protocol"
)

func plan(tasks ...protocol.BoardTask) map[string]protocol.BoardTask {
	m := map[string]protocol.BoardTask{}
	for _, t := range tasks {
		t.Plan = "p"
		m[t.ID] = t
	}
	return m
}

func tk(id, status string, needs ...string) protocol.BoardTask {
	return protocol.BoardTask{BoardTaskSpec: protocol.BoardTaskSpec{ID: id, Needs: needs}, Status: status}
}

func TestCriticalPathLeftCountsTheLongestChainNotDone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		tasks map[string]protocol.BoardTask
		want  int
	}{
		{"empty", plan(), 0},
		{"all done", plan(tk("a", "done"), tk("b", "done", "a")), 0},
		// a -> b -> d and a -> c -> d: three levels; e stands alone.
		{"diamond", plan(tk("a", "ready"), tk("b", "blocked", "a"), tk("c", "blocked", "a"), tk("d", "blocked", "b", "c"), tk("e", "ready")), 3},
		{"done needs do not count", plan(tk("a", "done"), tk("b", "claimed", "a"), tk("c", "blocked", "b")), 2},
		{"cancelled tasks do not count", plan(tk("a", "cancelled"), tk("b", "blocked", "a")), 1},
		{"a cycle ends", plan(tk("a", "blocked", "b"), tk("b", "blocked", "a")), 2},
	} {
		if got := progressOf("p", c.tasks).CriticalLeft; got != c.want {
			t.Errorf("%s: critical path left %d, want %d", c.name, got, c.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		tasks    map[string]protocol.BoardTask
		over, ok bool
	}{
		{"all done", plan(tk("a", "done"), tk("b", "done", "a")), true, true},
		{"running", plan(tk("a", "claimed"), tk("b", "blocked", "a")), false, false},
		{"failed, its dependents stuck", plan(tk("a", "failed"), tk("b", "blocked", "a"), tk("c", "blocked", "b"), tk("d", "done")), true, false},
		{"failed, another still running", plan(tk("a", "failed"), tk("b", "ready")), false, false},
		{"failed, a blocked task about to be ready", plan(tk("a", "failed"), tk("b", "done"), tk("c", "blocked", "b")), false, false},
		{"cancelled, the rest done", plan(tk("a", "cancelled"), tk("b", "done")), true, false},
		{"removed from the plan, the rest done", plan(removed(tk("a", "cancelled")), tk("b", "done")), true, true},
	} {
		over, ok := verdict(c.tasks)
		if over != c.over || ok != c.ok {
			t.Errorf("%s: over %v ok %v, want %v %v", c.name, over, ok, c.over, c.ok)
		}
	}
}

func removed(t protocol.BoardTask) protocol.BoardTask {
	t.Reason = protocol.BoardRemovedReason
	return t
}
