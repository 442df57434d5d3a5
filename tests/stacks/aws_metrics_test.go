package stacks_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/metrics"
	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

var dashboardSearch = regexp.MustCompile(`^SEARCH\('\{AIFlock,Flock((?:,[a-z]+)*)\} MetricName="([a-z_]+)" Flock="([^"]+)"', '(Sum|Minimum|Maximum|Average)', 60\)$`)

// The aws stack's CloudWatch dashboard (flock:aws.metrics, flock by
// default): a dashboard whose every graph searches a metric the services
// write, under the Flock dimension their task is given, in the stack's
// region, without an agent dimension; with metrics off, no dashboard and
// no EMF in the services' environment.
func TestAWSMetricsDashboard(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:agentCount": "3"})
	dash := awsGet(t, s, awsrules.TypeDashboard, "flock-dashboard")
	if name := dash.String("dashboardName"); name != awsflock.DashboardName("aws", "flock") || !regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`).MatchString(name) {
		t.Fatalf("dashboard name %q (PutDashboard: 1-255 of A-Z a-z 0-9 - _)", name)
	}
	var body struct {
		Widgets []struct {
			Type       string `json:"type"`
			Width      int    `json:"width"`
			Height     int    `json:"height"`
			Properties struct {
				Region  string             `json:"region"`
				Metrics [][]map[string]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(dash.String("dashboardBody")), &body); err != nil {
		t.Fatalf("the dashboard body is not JSON: %v", err)
	}
	if len(body.Widgets) == 0 || len(body.Widgets) > 500 {
		t.Fatalf("%d widgets (CloudWatch: at most 500)", len(body.Widgets))
	}
	names := metrics.Names()
	for _, w := range body.Widgets {
		if w.Type != "metric" || w.Properties.Region != capture.MockRegion || w.Width < 1 || w.Width > 24 || w.Height < 1 || w.Height > 1000 {
			t.Errorf("widget %+v: a metric widget in %s, width 1-24", w, capture.MockRegion)
		}
		for _, row := range w.Properties.Metrics {
			expr, _ := row[0]["expression"].(string)
			m := dashboardSearch.FindStringSubmatch(expr)
			if m == nil {
				t.Errorf("widget expression %q is not a SEARCH of one flock metric", expr)
				continue
			}
			base := strings.TrimSuffix(strings.TrimSuffix(m[2], "_sum"), "_count")
			if !slices.Contains(names, m[2]) && !slices.Contains(names, base) {
				t.Errorf("the dashboard searches %s, which the exporter does not write", m[2])
			}
			if strings.Contains(m[1], "agent") || m[3] != awsflock.MetricsFlock("aws", "flock") {
				t.Errorf("expression %q: dimensions %q, Flock %q", expr, m[1], m[3])
			}
		}
	}

	off := awsStack(t, capture.Config{"flock:agentCount": "3", "flock:aws": `{"metrics": "off"}`})
	if _, ok := off.Get(awsrules.TypeDashboard, "flock-dashboard"); ok {
		t.Error("a dashboard with flock:aws.metrics off")
	}
	td := awsGet(t, off, awsrules.TypeTaskDefinition, "flock-services-task")
	if strings.Contains(td.String("containerDefinitions"), protocol.EnvServicesEMF) {
		t.Error("the services write EMF with flock:aws.metrics off")
	}
	agents := awsStack(t, capture.Config{"flock:agentCount": "3", "flock:aws": `{"metrics": "agents"}`})
	td = awsGet(t, agents, awsrules.TypeTaskDefinition, "flock-services-task")
	if !strings.Contains(td.String("containerDefinitions"), `"name":"`+protocol.EnvServicesEMF+`","value":"agents"`) {
		t.Errorf("flock:aws.metrics agents: %s", td.String("containerDefinitions"))
	}
	if _, err := capture.RunAWS(capture.Config{"flock:aws": `{"metrics": "lots"}`}); err == nil || !strings.Contains(err.Error(), "flock:aws.metrics") {
		t.Errorf("flock:aws.metrics lots: %v", err)
	}
}
