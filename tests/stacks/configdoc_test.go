package stacks_test

import (
	"os"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/stacks"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// docs/configuration.md is generated from the configuration key table, which
// validation takes its defaults and ranges from: it fails here when stale.
func TestConfigurationDoc(t *testing.T) {
	doc := capture.ProjectFile(t, "docs", "configuration.md")
	want := flock.ConfigReference(stacks.ConfigKeys())
	if *update {
		if err := os.WriteFile(doc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(doc)
	if err != nil || string(got) != want {
		t.Errorf("docs/configuration.md is not current (%v): regenerate it with go test ./tests/stacks -run TestConfigurationDoc -update", err)
	}
}
