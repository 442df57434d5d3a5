package metrics_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/metrics"
)

var update = flag.Bool("update", false, "rewrite docs/observability.md's metric table")

const (
	pageFile   = "../../docs/observability.md"
	tableBegin = "<!-- metrics:begin -->\n"
	tableEnd   = "<!-- metrics:end -->"
)

// docs/observability.md lists every metric the exporter emits, as the
// exporter describes it: it fails here when stale.
func TestTheMetricsPageIsCurrent(t *testing.T) {
	raw, err := os.ReadFile(pageFile)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	head, rest, ok := strings.Cut(page, tableBegin)
	_, tail, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no %q … %q block", pageFile, tableBegin, tableEnd)
	}
	want := head + tableBegin + metrics.Reference() + tableEnd + tail
	if *update {
		if err := os.WriteFile(pageFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if page != want {
		t.Errorf("%s is not current: regenerate it with go test ./agent/metrics -run TestTheMetricsPageIsCurrent -update", pageFile)
	}
}
