package awsverify

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const arn = "arn:aws:ecs:eu-west-1:123456789012:task-definition/"

func service(t *testing.T, name string) Service {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var s Service
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// Each rollout as DescribeServices describes it (the documented response:
// a service's deployments with their rolloutState, its events newest
// first), judged against the task definition just applied.
func TestCheckReadsARolloutAsDescribeServicesTellsIt(t *testing.T) {
	for _, c := range []struct {
		file, want string
		done       bool
		state      string   // of the *Failed, "" for none
		says       []string // in its message
	}{
		{"completed", arn + "flock-agent-1:8", true, "", nil},
		{"in-progress", arn + "flock-agent-1:8", false, "", nil},
		// ECS reached a steady state, on the old revision: the case a
		// wait for steady state passes.
		{"rolled-back", arn + "flock-agent-1:8", false, "rolled back", []string{
			"service flock-agent-1: rolled back", "runs flock-agent-1:7, not flock-agent-1:8",
			"deployment ecs-svc/2222222222222222222 of flock-agent-1:8 FAILED: ECS deployment circuit breaker: tasks failed to start.",
			"rolling back to deployment",
		}},
		{"first-failed", arn + "flock-gateway:1", false, "rollout FAILED", []string{"service flock-gateway: rollout FAILED", "running 0 of 1, 3 tasks failed"}},
		{"draining", arn + "flock-agent-2:3", false, "service DRAINING", []string{"flock-agent-2"}},
		// A completed rollout of another revision than the one applied is
		// not this rollout's completion.
		{"completed", arn + "flock-agent-1:9", false, "rolled back", []string{"runs flock-agent-1:8, not flock-agent-1:9"}},
	} {
		done, err := Check(service(t, c.file), c.want)
		if done != c.done {
			t.Errorf("%s (want %s): done %v, want %v", c.file, c.want, done, c.done)
		}
		var f *Failed
		switch {
		case c.state == "" && err != nil:
			t.Errorf("%s: %v, want no error", c.file, err)
		case c.state != "" && (!errors.As(err, &f) || f.State != c.state):
			t.Errorf("%s: %v, want a failure %q", c.file, err, c.state)
		}
		for _, s := range c.says {
			if err == nil || !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %v, want it to say %q", c.file, err, s)
			}
		}
	}
}

// A rollout still in progress at the deadline: its new tasks never
// started, said with the counts.
func TestStalledSaysWhatNeverStarted(t *testing.T) {
	err := Stalled(service(t, "in-progress"), arn+"flock-agent-1:8", 10*time.Minute)
	var f *Failed
	if !errors.As(err, &f) || f.State != "not started" || !strings.Contains(err.Error(), "still IN_PROGRESS after 10m0s: running 0 of 1, 1 pending") ||
		!strings.Contains(err.Error(), "has started 1 tasks") {
		t.Fatalf("stalled: %v", err)
	}
}
