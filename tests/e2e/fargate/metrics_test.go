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
	deadline := time.Now().Add(time.Duration(protocol.EMFEverySecs+30) * time.Second)
	var docs []map[string]any
	for len(docs) == 0 {
		logs, err := engine.Logs(ctx, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(logs, "\n") {
			var doc map[string]any
			if json.Unmarshal([]byte(line), &doc) == nil && doc["_aws"] != nil {
				docs = append(docs, doc)
			}
		}
		if len(docs) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no EMF document in the services' log after %d s:\n%s", protocol.EMFEverySecs+30, logs)
			}
			time.Sleep(2 * time.Second)
		}
	}
	seen := map[string]bool{}
	for _, doc := range docs {
		raw, _ := json.Marshal(doc)
		cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		metrics, dims := cw["Metrics"].([]any), cw["Dimensions"].([]any)[0].([]any)
		if cw["Namespace"] != protocol.EMFNamespace || doc["Flock"] != flockDim || len(metrics) > 100 || len(dims) > 30 || len(raw) > 256<<10 {
			t.Errorf("an EMF document out of shape: %s", raw)
		}
		if _, ok := doc["agent"]; ok {
			t.Errorf("an agent dimension at the flock level: %s", raw)
		}
		for _, m := range metrics {
			name := m.(map[string]any)["Name"].(string)
			if _, ok := doc[name].(float64); !ok {
				t.Errorf("metric %s has no value: %s", name, raw)
			}
			seen[name] = true
		}
	}
	for _, want := range []string{"flock_agents", "flock_agent_up", "flock_bus_up", "flock_stream_bytes"} {
		if !seen[want] {
			t.Errorf("no %s in the services' EMF documents (%d documents)", want, len(docs))
		}
	}
}
