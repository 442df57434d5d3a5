package roster_test

import (
	"slices"
	"testing"

	"github.com/ai-flock/ai-flock/agent/roster"
)

func TestARosterIsASortedSetKnownOnceRead(t *testing.T) {
	var unknown roster.Roster
	if unknown.Known() || unknown.Has("agent-1") || unknown.IDs() == nil || unknown.Len() != 0 {
		t.Fatalf("the zero roster: %+v", unknown)
	}
	empty := roster.Of(nil)
	if !empty.Known() || empty.Len() != 0 {
		t.Fatal("a roster read with no agents is known and empty")
	}
	r := roster.Of([]string{"agent-3", "agent-1", "agent-3"})
	if !slices.Equal(r.IDs(), []string{"agent-1", "agent-3"}) || !r.Has("agent-3") || r.Has("agent-2") {
		t.Fatalf("roster %v", r.IDs())
	}
}
