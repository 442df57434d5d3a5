package policy_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// TestAWSOwnImageStackPasses: an aws stack whose agents run their own
// images (a Dockerfile shared by two agents, a base image, the stock one
// for the rest; and flock:image for all of 50) breaks no policy, in preview
// (unknown values) either, and the task policies saw every agent.
func TestAWSOwnImageStackPasses(t *testing.T) {
	df := capture.ProjectFile(t, "tests", "e2e", "byo", "Dockerfile")
	for _, c := range []struct {
		name   string
		agents int
		cfg    capture.Config
	}{
		{"mixed", 5, capture.Config{"flock:agentCount": "", "flock:agents": `[
			{"id": "agent-1", "image": {"dockerfile": "` + df + `"}},
			{"id": "agent-2", "image": {"dockerfile": "` + df + `"}},
			{"id": "agent-3", "image": {"base": "python:3.12-slim"}},
			{"id": "agent-4"}, {"id": "agent-5"}]`}},
		{"flock:image, 50 agents", 50, capture.Config{"flock:agentCount": "50", "flock:image": `{"dockerfile": "` + df + `"}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := awsCaptureWith(t, c.cfg)
			seen := assertClean(t, "aws", rs)
			if got := seen["ecs-task-non-root-user"]; got < c.agents+3 {
				t.Errorf("task definition policies inspected %d task definitions, want at least %d (the agents and the three bus nodes)", got, c.agents+3)
			}
			if vs := check("aws", previewOfNewStack(rs)); len(vs) > 0 {
				t.Errorf("in preview, the pack reports %d violations:%s", len(vs), messages(vs))
			}
		})
	}
}
