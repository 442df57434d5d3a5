package metrics_test

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A flock of 50, each agent heard, redeployed as one of 3: the exporter's
// agent series are agent-1 … agent-3 only (what it knows of the agents is
// the services bucket, which the bus writes from the topology).
func TestTheExporterCountsOnlyTheCurrentAgents(t *testing.T) {
	t.Parallel()
	f := bustest.Start(t, bustest.Agents(50))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, err := f.Bus.ServeMetrics(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + "/metrics"
	f.StoreHeartbeats(t, bustest.IDs(50)...)
	agentsUp := func(want []string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, _, body := get(t, url, map[string]string{"Accept-Encoding": "identity"})
			if code != http.StatusOK {
				t.Fatalf("scrape: %d %s", code, body)
			}
			got := parse(t, body)
			var labelled []string
			for k := range got {
				if a, ok := strings.CutPrefix(k, "flock_agent_heartbeat_age_seconds{agent="); ok {
					labelled = append(labelled, strings.TrimSuffix(a, "}"))
				}
			}
			// agent-2 before agent-10, as bustest.IDs lists them
			slices.SortFunc(labelled, func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) })
			if got["flock_agents"] == float64(len(want)) && slices.Equal(labelled, want) {
				for k := range got {
					if strings.Contains(k, "agent=agent-") && !slices.ContainsFunc(want, func(id string) bool {
						return strings.Contains(k, "agent="+id+"}") || strings.Contains(k, "agent="+id+",")
					}) {
						t.Fatalf("a series of an agent the flock does not have: %s", k)
					}
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 20 s: flock_agents %g, heartbeat series of %v, want %v", got["flock_agents"], labelled, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	agentsUp(bustest.IDs(50))
	f.Rerender(t, bustest.Agents(3))
	agentsUp(bustest.IDs(3))
}
