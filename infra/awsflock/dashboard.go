package awsflock

import (
	"encoding/json"
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/protocol"
)

// The flock's metrics on the aws target: the services write them into
// their log in CloudWatch's embedded metric format (namespace
// protocol.EMFNamespace, the dimension Flock), which CloudWatch Logs turns
// into metrics with no agent, no API call and no permission of the
// services' own; the stack declares a dashboard of them. Both come with
// flock:aws.metrics other than off.

// MetricsFlock is the value of the metrics' Flock dimension: the stack and
// the flock, as in the other account-wide names.
func MetricsFlock(stack, flockName string) string { return Scope(stack, flockName) }

// DashboardName is the flock's dashboard (dashboards are account-wide).
func DashboardName(stack, flockName string) string { return "ai-flock-" + Scope(stack, flockName) }

// dashboardWidget is one graph: a title and its metrics (a CloudWatch
// SEARCH over one metric name, so that every status, upstream or stream
// shows without being listed).
type dashboardWidget struct {
	Title string
	// Metric and the dimensions beside Flock it carries at the flock's
	// level (at agents' level the dashboard still shows the flock's sums:
	// those series are written too, aggregated by the same names).
	Metric string
	Dims   []string
	Stat   string
}

// DashboardWidgets are the dashboard's graphs.
var DashboardWidgets = []dashboardWidget{
	{"Agents up", "flock_agent_up", nil, "Minimum"},
	{"Agents in the flock", "flock_agents", nil, "Maximum"},
	{"Tasks finished, by status (per minute)", "flock_tasks_total", []string{"status"}, "Sum"},
	{"Task duration: total seconds (per minute)", "flock_task_duration_seconds_sum", nil, "Sum"},
	{"Tasks running", "flock_agent_tasks_running", nil, "Maximum"},
	{"Tasks waiting for agents", "flock_agent_queue_depth", nil, "Maximum"},
	{"Pool tasks waiting", "flock_pool_queue_depth", nil, "Maximum"},
	{"Messages waiting in mailboxes", "flock_agent_inbox_depth", nil, "Maximum"},
	{"Messages received (per minute)", "flock_messages_received_total", nil, "Sum"},
	{"Board tasks, by status", "flock_board_tasks", []string{"status"}, "Maximum"},
	{"Tokens spent, by upstream (per minute)", "flock_tokens_spent_total", []string{"upstream"}, "Sum"},
	{"Gateway calls, by upstream and status (per minute)", "flock_gateway_calls_total", []string{"status", "upstream"}, "Sum"},
	{"Gateway call seconds, by upstream (per minute)", "flock_gateway_call_duration_seconds_sum", []string{"upstream"}, "Sum"},
	{"Stream bytes", "flock_stream_bytes", []string{"stream"}, "Maximum"},
	{"Bus up (the services' view)", "flock_bus_up", nil, "Minimum"},
	{"Bus nodes current", "flock_bus_cluster_peers", nil, "Minimum"},
	{"Dead letters", "flock_dead_letters", nil, "Maximum"},
	{"Oldest heartbeat (seconds)", "flock_agent_heartbeat_age_seconds", nil, "Maximum"},
}

// DashboardBody is the dashboard's JSON (CloudWatch's dashboard body
// structure): one metric widget a graph, two a row.
func DashboardBody(region, flock string) (string, error) {
	type widget struct {
		Type       string         `json:"type"`
		X          int            `json:"x"`
		Y          int            `json:"y"`
		Width      int            `json:"width"`
		Height     int            `json:"height"`
		Properties map[string]any `json:"properties"`
	}
	var ws []widget
	for i, w := range DashboardWidgets {
		schema := "{" + protocol.EMFNamespace + ",Flock"
		for _, d := range w.Dims {
			schema += "," + d
		}
		schema += "}"
		search := fmt.Sprintf(`SEARCH('%s MetricName="%s" Flock="%s"', '%s', 60)`, schema, w.Metric, flock, w.Stat)
		ws = append(ws, widget{
			Type: "metric", X: 12 * (i % 2), Y: 6 * (i / 2), Width: 12, Height: 6,
			Properties: map[string]any{
				"title": w.Title, "region": region, "view": "timeSeries", "stacked": false, "period": 60,
				"metrics": []any{[]any{map[string]any{"expression": search, "id": "e1"}}},
			},
		})
	}
	b, err := json.Marshal(map[string]any{"widgets": ws})
	return string(b), err
}

// dashboard declares the flock's dashboard.
func (d *declarer) dashboard() error {
	if d.args.Metrics == protocol.EMFOff {
		return nil
	}
	body, err := DashboardBody(d.region, MetricsFlock(d.ctx.Stack(), d.name))
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if _, err := cloudwatch.NewDashboard(d.ctx, d.n("dashboard"), &cloudwatch.DashboardArgs{
		DashboardName: pulumi.String(DashboardName(d.ctx.Stack(), d.name)),
		DashboardBody: pulumi.String(body),
	}, d.parent); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	return nil
}
