package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// scrape is one relayed scrape's series: name{labels} -> value (a
// histogram gives its _count and _sum).
type scrape map[string]float64

func (s scrape) String() string {
	var keys []string
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %g\n", k, s[k])
	}
	return b.String()
}

func get(t *testing.T, url string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// No transparent decompression: the test reads what the relay sent.
	tr := &http.Transport{DisableCompression: true}
	res, err := (&http.Client{Transport: tr, Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, body
}

func parse(t *testing.T, text []byte) scrape {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(text)))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v\n%s", err, text)
	}
	out := scrape{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name + labels(m)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[name+"_count"+labels(m)] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labels(m)] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var l []string
	for _, p := range m.GetLabel() {
		l = append(l, p.GetName()+"="+p.GetValue())
	}
	sort.Strings(l)
	return "{" + strings.Join(l, ",") + "}"
}

func publish(t *testing.T, f *bustest.Bus, user, subject string, body any) {
	t.Helper()
	nc := f.Connect(t, user)
	b, _ := json.Marshal(body)
	if err := nc.Publish(subject, b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// What crosses the bus becomes series, scraped through the bus's relay as
// Prometheus scrapes it: agents' heartbeats, results and events, the
// gateway's usage, the board's tasks, the task consumers' queues and the
// streams' state, each agent under its own label (the subject's, never
// the body's).
func TestTheExporterCountsWhatCrossesTheBus(t *testing.T) {
	f := bustest.Start(t, bustest.Agents(2))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, err := f.Bus.ServeMetrics(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + "/metrics"

	now := time.Now().UTC()
	// agent-1's body claims to be agent-2: the subject says who it is.
	publish(t, f, "agent-1", protocol.HeartbeatSubject("agent-1"), protocol.Heartbeat{V: 1, Agent: "agent-2", Time: now, State: "ready", IntervalMS: 60000, Running: 2})
	publish(t, f, "agent-1", protocol.ResultSubject("agent-1"), protocol.Result{V: 1, TaskID: "a", Agent: "agent-1", Status: protocol.StatusOK, DurationMS: 250})
	publish(t, f, "agent-1", protocol.ResultSubject("agent-1"), protocol.Result{V: 1, TaskID: "b", Agent: "agent-1", Status: protocol.StatusFailed, DurationMS: 750})
	publish(t, f, "agent-1", protocol.ResultSubject("agent-1"), protocol.Result{V: 1, TaskID: "c", Agent: "agent-1", Status: "made-up"})
	publish(t, f, "agent-1", protocol.EventsSubject("agent-1"), protocol.Event{V: 1, Agent: "agent-1", Time: now, Type: protocol.EventInbox, Ref: "m1"})
	publish(t, f, "agent-1", protocol.EventsSubject("agent-1"), protocol.Event{V: 1, Agent: "agent-1", Time: now, Type: "not-an-event"})
	publish(t, f, protocol.GatewayUser, protocol.UsageSubject("agent-2"), protocol.Usage{V: 1, Agent: "agent-2", Upstream: "anthropic", Time: now, Status: 200,
		InputTokens: 100, OutputTokens: 20, Total: 120, SpentTokens: 120, BudgetTokens: 1000, DurationMS: 1500})
	publish(t, f, protocol.GatewayUser, protocol.UsageSubject("agent-2"), protocol.Usage{V: 1, Agent: "agent-2", Upstream: "anthropic", Time: now, Status: 429, SpentTokens: 120, BudgetTokens: 1000, DurationMS: 50})
	// Egress: labelled by the rule, never by the name the agent asked for.
	publish(t, f, protocol.GatewayUser, protocol.EgressSubject("agent-1"), protocol.EgressUse{V: 1, Agent: "agent-1", Host: "a.example.com:443", Rule: "*.example.com:443",
		Kind: protocol.EgressBrokered, Requests: 3, Refused: 1, Sent: 100, Received: 5000, Statuses: map[string]int64{"200": 2, "oops": 1}})
	publish(t, f, protocol.GatewayUser, protocol.EgressSubject("agent-1"), protocol.EgressUse{V: 1, Agent: "agent-1", Host: "random-7f3a.attacker.example:443", Kind: protocol.EgressRefused, Refused: 1})
	// A task for agent-2, which no agent takes: it waits on agent-2's consumer.
	snd := &bustest.Sender{JS: bustest.JetStream(t, f.Connect(t, protocol.OperatorUser))}
	if err := snd.Send(ctx, protocol.TaskSubject("agent-2"), protocol.Task{V: 1, ID: "waits", Kind: "echo"}); err != nil {
		t.Fatal(err)
	}
	op := board.NewOperatorClient(f.Connect(t, protocol.OperatorUser))
	if _, err := op.Apply(ctx, protocol.BoardPlan{Plan: "p", Tasks: []protocol.BoardTaskSpec{{ID: "x", Prompt: "x"}, {ID: "y", Prompt: "y"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := board.NewAgentClient(f.Connect(t, "agent-1"), "agent-1").Claim(ctx, "", "", ""); err != nil {
		t.Fatal(err)
	}

	want := scrape{
		"flock_agents":                                                                       2,
		"flock_agent_up{agent=agent-1}":                                                      1,
		"flock_agent_up{agent=agent-2}":                                                      0,
		"flock_agent_tasks_running{agent=agent-1}":                                           2,
		"flock_tasks_total{agent=agent-1,status=ok}":                                         1,
		"flock_tasks_total{agent=agent-1,status=failed}":                                     1,
		"flock_tasks_total{agent=agent-1,status=unknown}":                                    1,
		"flock_task_duration_seconds_count{agent=agent-1}":                                   3,
		"flock_task_duration_seconds_sum{agent=agent-1}":                                     1,
		"flock_agent_events_total{agent=agent-1,type=inbox}":                                 1,
		"flock_messages_received_total{agent=agent-1}":                                       1,
		"flock_gateway_calls_total{agent=agent-2,status=200,upstream=anthropic}":             1,
		"flock_gateway_calls_total{agent=agent-2,status=429,upstream=anthropic}":             1,
		"flock_gateway_call_duration_seconds_count{upstream=anthropic}":                      2,
		"flock_gateway_call_duration_seconds_sum{upstream=anthropic}":                        1.55,
		"flock_tokens_spent_total{agent=agent-2,upstream=anthropic}":                         120,
		"flock_budget_tokens{agent=agent-2}":                                                 1000,
		"flock_budget_left_tokens{agent=agent-2}":                                            880,
		"flock_agent_queue_depth{agent=agent-2}":                                             1,
		"flock_agent_queue_depth{agent=agent-1}":                                             0,
		"flock_board_tasks{status=ready}":                                                    1,
		"flock_board_tasks{status=claimed}":                                                  1,
		"flock_board_tasks_held{agent=agent-1}":                                              1,
		"flock_board_tasks_held{agent=agent-2}":                                              0,
		"flock_agent_inbox_depth{agent=agent-1}":                                             0,
		"flock_dead_letters":                                                                 0,
		"flock_bus_up":                                                                       1,
		"flock_bus_cluster_peers":                                                            1,
		"flock_stream_messages{stream=FLOCK_TASKS}":                                          1,
		"flock_egress_connections_total{agent=agent-1,kind=brokered,rule=*.example.com:443}": 1,
		"flock_egress_connections_total{agent=agent-1,kind=refused,rule=none}":               1,
		"flock_egress_requests_total{agent=agent-1,rule=*.example.com:443,status=200}":       2,
		"flock_egress_requests_total{agent=agent-1,rule=*.example.com:443,status=other}":     1,
		"flock_egress_requests_total{agent=agent-1,rule=*.example.com:443,status=refused}":   1,
		"flock_egress_requests_total{agent=agent-1,rule=none,status=refused}":                1,
		"flock_egress_bytes_total{agent=agent-1,direction=sent,rule=*.example.com:443}":      100,
		"flock_egress_bytes_total{agent=agent-1,direction=received,rule=*.example.com:443}":  5000,
	}
	var got scrape
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, hdr, body := get(t, url, map[string]string{"Accept-Encoding": "identity"})
		if code != http.StatusOK {
			t.Fatalf("scrape: %d %s", code, body)
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
			t.Fatalf("content type %q", ct)
		}
		got = parse(t, body)
		if missing := differ(want, got); len(missing) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after 20 s, these differ: %v\nscrape:\n%s", missing, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, ok := got["flock_agent_tasks_running{agent=agent-2}"]; ok {
		t.Error("agent-1's heartbeat, whose body named agent-2, was counted as agent-2's")
	}
	if got["flock_stream_max_bytes{stream=FLOCK_TASKS}"] <= 0 {
		t.Errorf("no byte limit for the task stream:\n%s", got)
	}
	for k := range got {
		if strings.Contains(k, "not-an-event") {
			t.Errorf("an unknown event type became a series: %s", k)
		}
	}

	// gzip to a scraper that takes it (Prometheus does), the same series.
	code, hdr, body := get(t, url, map[string]string{"Accept-Encoding": "gzip"})
	if code != http.StatusOK || hdr.Get("Content-Encoding") != "gzip" || len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		t.Fatalf("gzip scrape: %d %q %x", code, hdr.Get("Content-Encoding"), body[:min(4, len(body))])
	}
}

// differ lists the wanted series whose value is not what was scraped.
func differ(want, got scrape) []string {
	var out []string
	for k, v := range want {
		g, ok := got[k]
		if !ok || (g-v > 1e-9 || v-g > 1e-9) {
			out = append(out, fmt.Sprintf("%s: want %g, got %g (present %v)", k, v, g, ok))
		}
	}
	sort.Strings(out)
	return out
}

// With the services down the relay says so (503, naming them) at once,
// rather than hang or serve nothing as if it were metrics.
func TestTheRelayWithoutTheServices(t *testing.T) {
	f := bustest.Start(t, bustest.Agents(1), bustest.WithoutServices())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := f.Bus.ServeMetrics(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	code, _, body := get(t, "http://"+addr.String()+"/metrics", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "services are not running") {
		t.Fatalf("got %d %s", code, body)
	}
	if code, _, _ := get(t, "http://"+addr.String()+"/", nil); code != http.StatusNotFound {
		t.Fatalf("/ answered %d", code)
	}
}

// Nobody but the services answers scrapes, nobody but the gateway writes
// usage or egress records, and no agent may scrape: an agent can neither stand in for the
// exporter, feed it another agent's spending, nor read the flock's figures.
func TestAgentsCannotFeedOrAnswerTheExporter(t *testing.T) {
	f := bustest.Start(t, bustest.Agents(2))
	nc, err := f.Dial(t, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	errs := make(chan error, 4)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	if _, err := nc.Subscribe(protocol.SubjectMetrics, func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Publish(protocol.UsageSubject("agent-2"), []byte(`{"total":1}`))
	_ = nc.Publish(protocol.EgressSubject("agent-1"), []byte(`{"kind":"tunnel","sent":1}`))
	// Nor read the flock's figures (every agent's) by asking for them.
	_ = nc.PublishRequest(protocol.SubjectMetrics, protocol.InboxPrefix("agent-1")+".x", nil)
	_ = nc.Flush()
	seen := 0
	timeout := time.After(3 * time.Second)
	for seen < 4 {
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Fatalf("unexpected error: %v", err)
			}
			seen++
		case <-timeout:
			t.Fatalf("%d of 4 permission violations seen", seen)
		}
	}
}
