package stacks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// flock:program reaches every agent as AGENT_PROGRAM on both stacks, and an
// agent without one has no such variable.
func TestAgentProgramReachesTheAgents(t *testing.T) {
	want := protocol.EnvProgram + `=["/shared/common/bin/my-agent","--verbose"]`
	cfg := func() capture.Config {
		return capture.Config{"flock:agentCount": "2", "flock:program": `["/shared/common/bin/my-agent", "--verbose"]`}
	}
	s := dev(t, cfg())
	for id, c := range agentContainers(t, s) {
		if env := toStrings(list(c, "envs")); !slices.Contains(env, want) {
			t.Errorf("dev %s: env %v lacks %s", id, env, want)
		}
	}
	for id, c := range agentContainers(t, dev(t, count(2))) {
		if env := strings.Join(toStrings(list(c, "envs")), " "); strings.Contains(env, protocol.EnvProgram) {
			t.Errorf("dev %s: %s set with no program configured", id, protocol.EnvProgram)
		}
	}
	a := awsStack(t, cfg())
	for _, id := range []string{"agent-1", "agent-2"} {
		c := awsContainer(t, awsGet(t, a, awsrules.TypeTaskDefinition, "flock-"+id+"-task"))
		found := false
		for _, e := range c.Environment {
			found = found || e.Name+"="+e.Value == want
		}
		if !found {
			t.Errorf("aws %s: environment %+v lacks %s", id, c.Environment, want)
		}
	}
}
