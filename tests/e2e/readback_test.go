package e2e

import (
	"context"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// No churn: every container and network of the flock reads back from the
// real engine, the way the docker provider reads it, exactly as declared.
// A value that reads back in another spelling would show as a change on
// every preview, and replace the container on every `pulumi up` (as a bus
// declared with cpus "1" was: the provider reads it back as "1.0").
func TestReadBackMatchesDeclared(t *testing.T) {
	f := needReplay(t, "a flock deployed by pulumi: the real `pulumi preview --expect-no-changes` checks this (make layer3)")
	ctx := context.Background()
	checked := 0
	for _, r := range f.stack.Resources {
		var (
			doc   map[string]any
			err   error
			state func(map[string]any) map[string]any
		)
		switch r.Type {
		case capture.TypeContainer:
			doc, err = f.engine.Inspect(ctx, f.replayed.Containers[r.Name])
			state = replay.ContainerState
		case capture.TypeNetwork:
			doc, err = f.engine.InspectNetwork(ctx, f.replayed.Networks[r.Name])
			state = replay.NetworkState
		default:
			continue
		}
		if err != nil {
			t.Fatalf("inspect %s: %v", r.Name, err)
		}
		for _, d := range replay.Drift(replay.Inputs(r), state(doc)) {
			t.Errorf("%s %s: %s", r.Type, r.Name, d)
		}
		checked++
	}
	if want := 2 + 2*agentCount; checked < want {
		t.Fatalf("checked %d resources, want at least %d (bus, its network, every agent and its network)", checked, want)
	}
}
