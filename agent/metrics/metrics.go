// Package metrics is the flock's exporter: it turns what crosses the bus
// (heartbeats, results, events, the gateway's usage reports) and the state
// of the bus's streams and the board into Prometheus series named flock_*,
// and answers protocol.SubjectMetrics with them. It runs in flock-services,
// as the services' bus user: it only listens and asks the JetStream API
// about streams and consumers; it never reads a message body beyond the
// fields it counts, and keeps no port of its own.
//
// Label values are bounded: an agent label is an agent of the flock (from
// the services bucket; a subject of an agent the flock no longer has is not
// counted), a status is one of the protocol's, an upstream is what the
// gateway, which the operator configured, reports.
package metrics

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ai-flock/ai-flock/protocol"
)

// Config is what the exporter needs beside the connection.
type Config struct {
	// Agents returns the flock's agents now; IsAgent says whether id is
	// one (asked for every message counted: it must be cheap).
	Agents  func() []string
	IsAgent func(id string) bool
	// Board returns the board's tasks by status and the claimed ones by
	// holder; nil when there is no board to count.
	Board func() (byStatus, heldBy map[string]int)
	// Subscribe listens to a subject (nil: a subscription of the
	// exporter's own); the returned func stops it. The services share one
	// subscription per subject between the exporter and the audit writer.
	Subscribe func(subject string, h nats.MsgHandler) (func(), error)
	// ScrapeTimeout bounds the JetStream questions of one scrape
	// (DefaultScrapeTimeout when zero).
	ScrapeTimeout time.Duration
	Logger        *slog.Logger
}

// busGatherWindow is how long a clustered bus gathers a stream or consumer
// list from the streams' leaders before it answers with what it has, naming
// the rest missing (nats-server's fixed 4 s).
const busGatherWindow = 4 * time.Second

// DefaultScrapeTimeout waits out the bus's gather window with room to
// spare: a bound at or under it turns one stream whose leader is slow to
// answer into no stream series at all. The bus's relay waits longer
// (agent/bus: 8 s), Prometheus's default scrape timeout longer still.
const DefaultScrapeTimeout = busGatherWindow + 2*time.Second

// Exporter is the running exporter.
type Exporter struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry
	c   *counters

	mu    sync.Mutex
	beats map[string]beat // by agent: the last heartbeat
	seen  map[string]bool // agents with series

	subs []func()
}

type beat struct {
	hb   protocol.Heartbeat
	seen time.Time
}

// Start subscribes to what the exporter counts and answers
// protocol.SubjectMetrics until Stop.
func Start(nc *nats.Conn, js jetstream.JetStream, cfg Config) (*Exporter, error) {
	if cfg.Agents == nil || cfg.IsAgent == nil {
		return nil, fmt.Errorf("metrics: Config.Agents and Config.IsAgent are required")
	}
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = DefaultScrapeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{nc: nc, js: js, cfg: cfg, log: cfg.Logger, reg: prometheus.NewRegistry(),
		c: newCounters(), beats: map[string]beat{}, seen: map[string]bool{}}
	if err := e.c.register(e.reg); err != nil {
		return nil, err
	}
	if err := e.reg.Register(&state{e: e}); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	for subject, h := range map[string]nats.MsgHandler{
		protocol.SubjectHeartbeats: e.onHeartbeat,
		protocol.SubjectResults:    e.onResult,
		protocol.SubjectEvents:     e.onEvent,
		protocol.SubjectUsage:      e.onUsage,
		protocol.SubjectEgress:     e.onEgress,
		protocol.SubjectMetrics:    e.onScrape,
	} {
		stop, err := subscribe(nc, cfg.Subscribe, subject, h)
		if err != nil {
			e.Stop()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		e.subs = append(e.subs, stop)
	}
	if err := nc.Flush(); err != nil {
		e.Stop()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return e, nil
}

// Stop unsubscribes.
func (e *Exporter) Stop() {
	for _, stop := range e.subs {
		stop()
	}
	e.subs = nil
}

// subscribe listens to subject through with, or on a subscription of its
// own with room for a burst (a slow scrape must not cost a heartbeat).
func subscribe(nc *nats.Conn, with func(string, nats.MsgHandler) (func(), error), subject string, h nats.MsgHandler) (func(), error) {
	if with != nil {
		return with(subject, h)
	}
	sub, err := nc.Subscribe(subject, h)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subject, err)
	}
	_ = sub.SetPendingLimits(1<<16, 64<<20)
	return func() { _ = sub.Unsubscribe() }, nil
}

// Gather is every series now (what a scrape gets).
func (e *Exporter) Gather() ([]byte, error) {
	mfs, err := e.reg.Gather()
	if err != nil && len(mfs) == 0 {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("metrics: encode %s: %w", mf.GetName(), err)
		}
	}
	return b.Bytes(), nil
}

// onScrape answers a scrape: the text format, gzip-compressed, or an error
// text (too large for the bus's payload limit, say).
func (e *Exporter) onScrape(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	reply := nats.NewMsg(m.Reply)
	text, err := e.Gather()
	if err == nil {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(text)
		_ = w.Close()
		if max := e.nc.MaxPayload(); int64(z.Len()) > max {
			err = fmt.Errorf("the metrics take %d bytes compressed, over the bus's max payload (%d): raise flock:bus.maxPayloadKiB", z.Len(), max)
		} else {
			reply.Data = z.Bytes()
			reply.Header.Set("Content-Encoding", protocol.MetricsEncoding)
		}
	}
	if err != nil {
		e.log.Warn("scrape failed", "err", err)
		reply.Header.Set(protocol.MetricsErrorHeader, "1")
		reply.Data = []byte(err.Error())
	}
	if err := m.RespondMsg(reply); err != nil {
		e.log.Warn("scrape answer not sent", "err", err)
	}
}

// agentOf is the agent a subject agent.<id>.<kind> or task.result.<id>
// names, if it is one of the flock's.
func (e *Exporter) agentOf(subject string) (string, bool) {
	var id string
	switch t := strings.Split(subject, "."); {
	case len(t) == 3 && t[0] == "agent":
		id = t[1]
	case len(t) == 3 && t[0] == "task" && t[1] == "result":
		id = t[2]
	default:
		return "", false
	}
	if !e.cfg.IsAgent(id) {
		return "", false
	}
	e.mu.Lock()
	e.seen[id] = true
	e.mu.Unlock()
	return id, true
}

// take reads m's body into v for the agent its subject names, if that is
// one of the flock's and the body is readable.
func (e *Exporter) take(m *nats.Msg, v any) (string, bool) {
	id, ok := e.agentOf(m.Subject)
	return id, ok && json.Unmarshal(m.Data, v) == nil
}

func (e *Exporter) onHeartbeat(m *nats.Msg) {
	var hb protocol.Heartbeat
	id, ok := e.take(m, &hb)
	if !ok {
		return
	}
	e.mu.Lock()
	e.beats[id] = beat{hb: hb, seen: time.Now()}
	e.mu.Unlock()
}

func (e *Exporter) onResult(m *nats.Msg) {
	id, ok := e.agentOf(m.Subject)
	if !ok {
		return
	}
	var r struct {
		Status     string  `json:"status"`
		DurationMS float64 `json:"duration_ms"`
	}
	if json.Unmarshal(m.Data, &r) != nil {
		r.Status = ""
	}
	status := taskStatus(r.Status)
	e.c.tasks.WithLabelValues(id, status).Inc()
	if status != protocol.StatusRejected && r.DurationMS >= 0 {
		e.c.taskSeconds.WithLabelValues(id).Observe(r.DurationMS / 1000)
	}
}

func (e *Exporter) onEvent(m *nats.Msg) {
	var ev struct {
		Type string `json:"type"`
	}
	id, ok := e.take(m, &ev)
	if !ok || !countedEvents[ev.Type] {
		return
	}
	e.c.events.WithLabelValues(id, ev.Type).Inc()
	if ev.Type == protocol.EventInbox {
		e.c.received.WithLabelValues(id).Inc()
	}
}

func (e *Exporter) onUsage(m *nats.Msg) {
	var u protocol.Usage
	id, ok := e.take(m, &u)
	if !ok {
		return
	}
	up := u.Upstream
	if up == "" {
		up = "unknown"
	}
	e.c.calls.WithLabelValues(id, up, strconv.Itoa(u.Status)).Inc()
	if u.Total > 0 {
		e.c.tokens.WithLabelValues(id, up).Add(float64(u.Total))
	}
	if u.DurationMS > 0 {
		e.c.callSeconds.WithLabelValues(up).Observe(u.DurationMS / 1000)
	}
	e.c.spent.WithLabelValues(id).Set(float64(u.SpentTokens))
	if u.BudgetTokens > 0 {
		e.c.budget.WithLabelValues(id).Set(float64(u.BudgetTokens))
		e.c.budgetLeft.WithLabelValues(id).Set(float64(max(0, u.BudgetTokens-u.SpentTokens)))
	}
}

// onEgress counts one egress connection's record (the gateway's only: no
// agent may publish on agent.<id>.egress). Its labels are bounded: the
// rule's key (the operator's), the kind, the status by code.
func (e *Exporter) onEgress(m *nats.Msg) {
	var u protocol.EgressUse
	id, ok := e.take(m, &u)
	if !ok {
		return
	}
	rule := u.Rule
	switch {
	case rule == "":
		rule = "none"
	case len(rule) > 260:
		rule = "invalid"
	}
	kind := u.Kind
	switch kind {
	case protocol.EgressBrokered, protocol.EgressTunnel, protocol.EgressPlain, protocol.EgressRefused:
	default:
		kind = "unknown"
	}
	e.c.egressConns.WithLabelValues(id, rule, kind).Inc()
	for code, n := range u.Statuses {
		if c, err := strconv.Atoi(code); err != nil || c < 100 || c > 599 {
			code = "other"
		}
		if n > 0 {
			e.c.egressRequests.WithLabelValues(id, rule, code).Add(float64(n))
		}
	}
	if u.Refused > 0 {
		e.c.egressRequests.WithLabelValues(id, rule, "refused").Add(float64(u.Refused))
	}
	if u.Sent > 0 {
		e.c.egressBytes.WithLabelValues(id, rule, "sent").Add(float64(u.Sent))
	}
	if u.Received > 0 {
		e.c.egressBytes.WithLabelValues(id, rule, "received").Add(float64(u.Received))
	}
}

// taskStatus bounds a result's status to the protocol's.
func taskStatus(s string) string {
	switch s {
	case protocol.StatusOK, protocol.StatusFailed, protocol.StatusTimeout, protocol.StatusRejected, protocol.StatusError:
		return s
	}
	return "unknown"
}

// countedEvents are the event types counted by type.
var countedEvents = map[string]bool{
	protocol.EventStarted: true, protocol.EventReconnected: true, protocol.EventInbox: true,
	protocol.EventBroadcast: true, protocol.EventTaskRejected: true,
	protocol.EventProgramStarted: true, protocol.EventProgramExited: true,
	protocol.EventBoardClaimed: true, protocol.EventBoardDone: true,
	protocol.EventBoardFailed: true, protocol.EventBoardReleased: true,
}

// forget drops the series of agents the flock no longer has.
func (e *Exporter) forget(agents map[string]bool) {
	e.mu.Lock()
	var gone []string
	for id := range e.seen {
		if !agents[id] {
			gone = append(gone, id)
			delete(e.seen, id)
			delete(e.beats, id)
		}
	}
	e.mu.Unlock()
	for _, id := range gone {
		e.c.forget(id)
	}
}

// scrapeContext bounds one scrape's questions to the bus.
func (e *Exporter) scrapeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.cfg.ScrapeTimeout)
}
