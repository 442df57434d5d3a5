package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// A group of series larger than a directive may hold is split into
// documents of at most EMFMaxMetrics; values that are not numbers, and
// names longer than the format allows, are left out rather than make
// CloudWatch drop the whole document.
func TestEMFDocumentsStayWithinTheFormatsLimits(t *testing.T) {
	var series []emfSeries
	for i := range 250 {
		series = append(series, emfSeries{name: fmt.Sprintf("flock_m%d", i), unit: "Count", dims: map[string]string{"agent": "agent-1", "status": "ok"}, value: float64(i)})
	}
	series = append(series,
		emfSeries{name: "flock_nan", unit: "None", dims: map[string]string{}, value: math.NaN()},
		emfSeries{name: "flock_" + strings.Repeat("x", 300), unit: "None", dims: map[string]string{}, value: 1},
		emfSeries{name: "flock_one", unit: "None", dims: map[string]string{}, value: 1})
	docs := documents(series, "AIFlock", "flock", time.UnixMilli(1700000000000))
	if len(docs) != 4 {
		t.Fatalf("%d documents, want 3 of 250 series (100, 100, 50) and 1 of the one valid dimensionless", len(docs))
	}
	total := 0
	for _, d := range docs {
		b, _ := json.Marshal(d)
		if len(b) > EMFMaxBytes {
			t.Errorf("a document of %d bytes", len(b))
		}
		cw := d["_aws"].(map[string]any)["CloudWatchMetrics"].([]map[string]any)[0]
		metrics := cw["Metrics"].([]map[string]string)
		dims := cw["Dimensions"].([][]string)
		if len(metrics) > EMFMaxMetrics || len(dims) != 1 || len(dims[0]) > EMFMaxDimensions {
			t.Errorf("%d metrics, dimension sets %v", len(metrics), dims)
		}
		for _, m := range metrics {
			if _, ok := d[m["Name"]].(float64); !ok {
				t.Errorf("metric %s has no numeric value in its document", m["Name"])
			}
		}
		for _, n := range dims[0] {
			if _, ok := d[n].(string); !ok {
				t.Errorf("dimension %s has no string value", n)
			}
		}
		total += len(metrics)
	}
	if total != 251 {
		t.Errorf("%d metrics written, want 251 (the NaN and the over-long name left out)", total)
	}
}
