package fargate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// The services' task writes the flock's metrics as CloudWatch's embedded
// metric format into its log, as the awslogs driver would ship it: within
// a minute and a bit of start, documents in the namespace AIFlock under
// the Flock dimension the task definition gives, within the format's
// limits, with no agent dimension at the default (flock) level.
func TestFargateServicesWriteEMF(t *testing.T) {
	need(t)
	task, c := servicesTask(t)
	flockDim := ""
	for _, e := range task.Def.Containers[0].Environment {
		if e.Name == protocol.EnvServicesFlock {
			flockDim = e.Value
		}
	}
	if flockDim == "" {
		t.Fatalf("the services' task definition gives no %s", protocol.EnvServicesFlock)
	}
	ctx := context.Background()
	// Read the log until every wanted metric has been written, for one
	// write period and a bit: a write whose scrape the bus did not answer
	// in time is followed by the next one.
	want := []string{"flock_agents", "flock_agent_up", "flock_bus_up", "flock_stream_bytes"}
	deadline := time.Now().Add(time.Duration(protocol.EMFEverySecs+30) * time.Second)
	for {
		logs, err := engine.Logs(ctx, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		docs, other := emfDocuments(logs)
		seen := checkEMF(t, docs, flockDim)
		var missing []string
		for _, name := range want {
			if !seen[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d s, no %s in the services' EMF documents (%d documents); the services' other log lines:\n%s",
				protocol.EMFEverySecs+30, strings.Join(missing, ", "), len(docs), strings.Join(other, "\n"))
		}
		time.Sleep(5 * time.Second)
	}
}

// emfDocuments splits a log into its EMF documents and its other lines.
func emfDocuments(logs string) (docs []map[string]any, other []string) {
	for _, line := range strings.Split(logs, "\n") {
		var doc map[string]any
		if json.Unmarshal([]byte(line), &doc) == nil && doc["_aws"] != nil {
			docs = append(docs, doc)
		} else if line != "" {
			other = append(other, line)
		}
	}
	return docs, other
}

// checkEMF fails t for every document out of the format's shape, and
// returns the metrics the documents hold.
func checkEMF(t *testing.T, docs []map[string]any, flockDim string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, doc := range docs {
		raw, _ := json.Marshal(doc)
		cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		metrics, dims := cw["Metrics"].([]any), cw["Dimensions"].([]any)[0].([]any)
		if cw["Namespace"] != protocol.EMFNamespace || doc["Flock"] != flockDim || len(metrics) > 100 || len(dims) > 30 || len(raw) > 256<<10 {
			t.Fatalf("an EMF document out of shape: %s", raw)
		}
		if _, ok := doc["agent"]; ok {
			t.Fatalf("an agent dimension at the flock level: %s", raw)
		}
		for _, m := range metrics {
			name := m.(map[string]any)["Name"].(string)
			if _, ok := doc[name].(float64); !ok {
				t.Fatalf("metric %s has no value: %s", name, raw)
			}
			seen[name] = true
		}
	}
	return seen
}
