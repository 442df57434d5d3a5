package metrics

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the series the exporter counts as messages cross the bus.
type counters struct {
	tasks       *prometheus.CounterVec   // results, by agent and status
	taskSeconds *prometheus.HistogramVec // how long a task ran
	events      *prometheus.CounterVec   // agent events, by type
	received    *prometheus.CounterVec   // messages stored in an agent's inbox
	calls       *prometheus.CounterVec   // metered gateway calls, by upstream and HTTP status
	callSeconds *prometheus.HistogramVec // how long a metered call took, by upstream
	tokens      *prometheus.CounterVec   // tokens charged, by upstream
	spent       *prometheus.GaugeVec     // the agent's total in its budget's period
	budget      *prometheus.GaugeVec
	budgetLeft  *prometheus.GaugeVec
	// The way out, by agent and the rule that served it ("none": refused
	// without one; never the name an agent asked for, which is anything).
	egressConns    *prometheus.CounterVec // connections, by kind
	egressRequests *prometheus.CounterVec // requests, by the upstream's status or "refused"
	egressBytes    *prometheus.CounterVec // bytes, by direction
}

// Buckets: a task runs from milliseconds (an echo) to its timeout (minutes);
// a model call from a fraction of a second to a long stream.
var (
	taskBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900}
	callBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

func newCounters() *counters {
	agent := []string{"agent"}
	return &counters{
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_tasks_total",
			Help: "Tasks an agent finished, by result status (ok, failed, timeout, rejected, error)."}, []string{"agent", "status"}),
		taskSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flock_task_duration_seconds",
			Help: "How long an agent's tasks ran (rejected ones, which never ran, left out).", Buckets: taskBuckets}, agent),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_agent_events_total",
			Help: "Events an agent published, by type (program.exited, board.done, inbox, ...)."}, []string{"agent", "type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_messages_received_total",
			Help: "Messages an agent took from its mailbox into its inbox."}, agent),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_gateway_calls_total",
			Help: "Metered model calls through the gateway, by upstream and the upstream's HTTP status."}, []string{"agent", "upstream", "status"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "flock_gateway_call_duration_seconds",
			Help: "How long a metered model call took at the gateway, to the response's end.", Buckets: callBuckets}, []string{"upstream"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_tokens_spent_total",
			Help: "Tokens charged to an agent's budget, by upstream."}, []string{"agent", "upstream"}),
		spent: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flock_budget_spent_tokens",
			Help: "An agent's tokens spent in its budget's period, as of its last metered call."}, agent),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flock_budget_tokens",
			Help: "An agent's token budget (agents without one have no series)."}, agent),
		budgetLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flock_budget_left_tokens",
			Help: "An agent's tokens left in its budget, as of its last metered call."}, agent),
		egressConns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_egress_connections_total",
			Help: "An agent's egress connections through the gateway, by the rule that served it (none: refused without one) and kind (brokered, tunnel, plain, refused)."}, []string{"agent", "rule", "kind"}),
		egressRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_egress_requests_total",
			Help: "An agent's requests inside egress connections, by rule and the upstream's HTTP status (refused: the gateway refused it)."}, []string{"agent", "rule", "status"}),
		egressBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flock_egress_bytes_total",
			Help: "Bytes of an agent's egress, by rule and direction (sent: agent to upstream; received)."}, []string{"agent", "rule", "direction"}),
	}
}

func (c *counters) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.tasks, c.taskSeconds, c.events, c.received, c.calls, c.callSeconds,
		c.tokens, c.spent, c.budget, c.budgetLeft, c.egressConns, c.egressRequests, c.egressBytes}
}

func (c *counters) register(reg *prometheus.Registry) error {
	for _, col := range c.collectors() {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// forget drops agent id's series.
func (c *counters) forget(id string) {
	l := prometheus.Labels{"agent": id}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		c.tasks, c.taskSeconds, c.events, c.received, c.calls, c.tokens, c.spent, c.budget, c.budgetLeft,
		c.egressConns, c.egressRequests, c.egressBytes,
	} {
		v.DeletePartialMatch(l)
	}
}

// Names are the metric families the exporter can emit, sorted (a
// histogram's family: its series add _bucket, _sum and _count).
func Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range newCounters().collectors() {
			c.Describe(ch)
		}
		(&state{}).Describe(ch)
		close(ch)
	}()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// fqName reads a Desc's name from its String (the client has no getter).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)
