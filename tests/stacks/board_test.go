package stacks_test

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// boardAgents lists agent-1 … agent-3; with board settings, some have
// labels and flock:board is set.
func boardAgents(settings bool) capture.Config {
	if !settings {
		return capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"agent-2"},{"id":"agent-3"}]`}
	}
	return capture.Config{
		"flock:agentCount": "",
		"flock:agents":     `[{"id":"agent-1","labels":["go","review"]},{"id":"agent-2"},{"id":"agent-3","labels":["gpu-large"]}]`,
		"flock:board":      `{"claimLimit": 3, "addQuota": 0}`,
	}
}

// An agent's labels and flock:board are the board's to know (the bus
// topology carries them): they name no resource and reach no agent's
// container, so setting them adds, removes and changes none of the agents'
// resources.
func TestBoardSettingsChangeNoAgentResource(t *testing.T) {
	for _, stack := range []string{"dev", "aws"} {
		t.Run(stack, func(t *testing.T) {
			without := captured(t, stack, boardAgents(false))
			with := captured(t, stack, boardAgents(true))
			agentResources := 0
			for _, r := range without.Resources {
				if strings.HasPrefix(r.Name, "flock-agent-1") {
					agentResources++
				}
			}
			if agentResources == 0 {
				t.Fatal("no resource named flock-agent-1…: the agents' resources are named otherwise")
			}
			changed, removed, added := changedBetween(without, with)
			if len(removed)+len(added) != 0 {
				t.Errorf("labels removed %v and added %v: they must name no resource", removed, added)
			}
			for _, name := range changed {
				if strings.HasPrefix(name, "flock-agent-") {
					t.Errorf("labels changed %s: an agent never gets its own labels", name)
				}
			}
		})
	}
}

// Bad labels and board settings fail the real program, naming the key and
// the rule, and declare nothing.
func TestBoardConfigErrors(t *testing.T) {
	agents := func(list string) capture.Config {
		return capture.Config{"flock:agentCount": "", "flock:agents": list}
	}
	for _, tc := range []struct {
		name string
		cfg  capture.Config
		want string
	}{
		{"bad label", agents(`[{"id":"agent-1","labels":["go","Go"]}]`), `flock:agents[0].labels[1]: must match ^[a-z0-9][a-z0-9_-]{0,62}$ (got "Go")`},
		{"duplicate", agents(`[{"id":"agent-1"},{"id":"agent-2","labels":["go","go"]}]`), `flock:agents[1].labels[1]: duplicates flock:agents[1].labels[0]`},
		{"not a list", agents(`[{"id":"agent-1","labels":"go"}]`), `flock:agents: must be a list of {id, slot, limits, program, gateway, image, labels}`},
		{"claim limit", capture.Config{"flock:board": `{"claimLimit": 0}`}, "flock:board.claimLimit: must be between 1 and 100 tasks (got 0)"},
		{"add quota", capture.Config{"flock:board": `{"addQuota": 10001}`}, "flock:board.addQuota: must be between 0 and 10000 tasks (got 10001)"},
		{"unknown field", capture.Config{"flock:board": `{"claimLimits": 2}`}, `flock:board: must be an object {claimLimit, addQuota, keepFinished}: unknown field "claimLimits"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := capture.RunStack("dev", tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
			if len(s.Resources) != 0 {
				t.Errorf("declared %d resources with an invalid configuration", len(s.Resources))
			}
		})
	}
}
