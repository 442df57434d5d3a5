package stacks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

type key struct{ typ, name string }

func index(s *capture.Stack) map[key]capture.Resource {
	out := map[key]capture.Resource{}
	for _, r := range s.Resources {
		out[key{r.Type, r.Name}] = r
	}
	return out
}

// changedBetween lists the resources of before whose inputs differ in after
// (or that after no longer declares), and the resources after adds.
func changedBetween(before, after *capture.Stack) (changed, removed, added []string) {
	b, a := index(before), index(after)
	for k, r := range b {
		other, ok := a[k]
		switch {
		case !ok:
			removed = append(removed, k.name)
		case !r.Inputs.DeepEquals(other.Inputs):
			changed = append(changed, k.name)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			added = append(added, k.name)
		}
	}
	return
}

// Adding an agent adds its own resources and re-renders the bus config
// (the bus reloads it); nothing else changes: not the other agents, not the bus.
func TestAddingAnAgentChangesNoOtherAgent(t *testing.T) {
	three, four := dev(t, count(3)), dev(t, count(4))
	checkOnlyAgent4Added(t, three, four, []string{"flock-agent-4-bus-link"})
}

// With three bus nodes too: no node is replaced or updated, agent-4 gets one
// link to each.
func TestAddingAnAgentReplacesNoBusNode(t *testing.T) {
	three, four := dev(t, replicas(count(3), 3)), dev(t, replicas(count(4), 3))
	checkOnlyAgent4Added(t, three, four, []string{"flock-agent-4-bus-1-link", "flock-agent-4-bus-2-link", "flock-agent-4-bus-3-link"})
}

func checkOnlyAgent4Added(t *testing.T, before, after *capture.Stack, links []string) {
	t.Helper()
	changed, removed, added := changedBetween(before, after)
	checkOneAgentDiff(t, changed, removed, "removed", added, "agent-4", "adding agent-4 added")
	for _, want := range append([]string{"flock-agent-4", "flock-agent-4-net", "flock-agent-4-prepare"}, links...) {
		if !slices.Contains(added, want) {
			t.Errorf("agent-4 lacks %s (added %v)", want, added)
		}
	}
}

// checkOneAgentDiff checks what one agent coming or going changes: nothing
// went the other way (none, reported as noneWhat), flock-bus-config is the
// only change, and every name in diff is the agent's (else "<doing> <name>").
func checkOneAgentDiff(t *testing.T, changed, none []string, noneWhat string, diff []string, agent, doing string) {
	t.Helper()
	if len(none) != 0 {
		t.Errorf("%s: %v", noneWhat, none)
	}
	if len(changed) != 1 || changed[0] != "flock-bus-config" {
		t.Errorf("changed %v; want only flock-bus-config", changed)
	}
	for _, name := range diff {
		if !strings.HasPrefix(name, "flock-"+agent) {
			t.Errorf("%s %s", doing, name)
		}
	}
}

// Removing an agent from the middle of an explicit list leaves the agents
// after it untouched: identity comes from the slot, not the position.
func TestRemovingAnAgentChangesNoOtherAgent(t *testing.T) {
	all := dev(t, capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"agent-2"},{"id":"researcher","slot":9}]`})
	fewer := dev(t, capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"researcher","slot":9}]`})
	changed, removed, added := changedBetween(all, fewer)
	checkOneAgentDiff(t, changed, added, "added", removed, "agent-2", "removing agent-2 removed")
	if len(removed) == 0 {
		t.Error("agent-2's resources were not removed")
	}
}

// The same configuration declares the same inputs, secrets included: a
// second preview shows no diff, and credentials are not rotated by accident.
func TestNoChurnBetweenPreviews(t *testing.T) {
	a, b := dev(t, count(3)), dev(t, count(3))
	changed, removed, added := changedBetween(a, b)
	if len(changed)+len(removed)+len(added) != 0 {
		t.Fatalf("two runs of one config differ: changed %v removed %v added %v", changed, removed, added)
	}
	seedA := a.Outputs["operatorSeed"]
	if !seedA.Secret || !strings.HasPrefix(seedA.Value.(string), "SU") {
		t.Fatalf("operatorSeed output %+v: want a secret nkey seed", seedA.Secret)
	}
	if seedA != b.Outputs["operatorSeed"] {
		t.Fatalf("operator credentials changed between runs")
	}
}

// A different bus secret yields different credentials for every user.
func TestBusSecretDrivesCredentials(t *testing.T) {
	a := dev(t, count(2))
	cfg, _ := capture.StackConfig("dev")
	cfg["flock:busSecret"] = strings.Repeat("x", 40)
	b, err := capture.Run("dev", cfg, "flock:busSecret")
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := a.Get(capture.TypeCommand, "flock-agent-1-prepare")
	pb, _ := b.Get(capture.TypeCommand, "flock-agent-1-prepare")
	if pa.String("stdin") == pb.String("stdin") {
		t.Fatal("agent-1's credentials do not depend on flock:busSecret")
	}
	ca, _ := a.Get(capture.TypeCommand, "flock-bus-config")
	cb, _ := b.Get(capture.TypeCommand, "flock-bus-config")
	if ca.String("stdin") == cb.String("stdin") {
		t.Fatal("the bus config's public keys do not depend on flock:busSecret")
	}
}
