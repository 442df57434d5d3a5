package service

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/protocol"
)

const (
	usageQueue     = 4096        // reports waiting for the bus; past it they are dropped
	dropReportEach = time.Minute // how often drops are logged (once, with the count)
)

// connectBus dials the bus as protocol.GatewayUser. It returns at once even
// if the bus is down, and reconnects forever: the gateway serves model calls
// with or without it.
func connectBus(url string, nk nats.Option, log *slog.Logger) (*nats.Conn, error) {
	return nats.Connect(url, nk,
		nats.Name("flock-gateway"),
		nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.GatewayUser)),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(1<<20), // bounded: past it a publish fails and the report is counted dropped
		nats.PingInterval(20*time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DrainTimeout(3*time.Second),
		nats.ConnectHandler(func(*nats.Conn) { log.Info("bus connected") }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("bus connection lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("bus reconnected") }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("bus error", "err", err) }),
	)
}

// publisher puts each metered call on agent.<id>.usage, and each egress
// connection's record on agent.<id>.egress, from its own goroutine: the
// request path only offers a report to a bounded queue and never waits for
// the bus.
type publisher struct {
	nc      *nats.Conn
	log     *slog.Logger
	queue   chan report
	dropped atomic.Int64 // since the last report of drops
	stop    chan struct{}
	done    chan struct{}
}

func newPublisher(nc *nats.Conn, log *slog.Logger) *publisher {
	p := &publisher{nc: nc, log: log, queue: make(chan report, usageQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// offer is gateway.Config.OnUsage.
func (p *publisher) offer(u gateway.Usage) {
	m := protocol.Usage{V: 1, Agent: u.Agent, Upstream: u.Upstream, Time: time.Now().UTC(), Status: u.Status,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		Total: u.Total, SpentTokens: u.SpentTokens, BudgetTokens: u.BudgetTokens,
		DurationMS: float64(u.Duration) / float64(time.Millisecond), Trace: u.Trace}
	p.enqueue(report{subject: protocol.UsageSubject(u.Agent), body: m})
}

// report is one message for the bus.
type report struct {
	subject string
	body    any
}

func (p *publisher) enqueue(r report) {
	select {
	case p.queue <- r:
	default:
		p.dropped.Add(1)
	}
}

// offerEgress is broker.Config.OnConnection.
func (p *publisher) offerEgress(c broker.Connection) {
	p.enqueue(report{subject: protocol.EgressSubject(c.Agent), body: egressUse(c, time.Now().UTC())})
}

// egressUse is the bus's record of c.
func egressUse(c broker.Connection, end time.Time) protocol.EgressUse {
	u := protocol.EgressUse{V: 1, Agent: c.Agent, Host: c.Host, Rule: c.Rule, Kind: c.Kind, Time: end,
		Requests: c.Requests, Refused: c.Refused, Sent: c.Sent, Received: c.Received,
		DurationMS: float64(c.Duration) / float64(time.Millisecond)}
	for code, n := range c.Statuses {
		if u.Statuses == nil {
			u.Statuses = map[string]int64{}
		}
		u.Statuses[strconv.Itoa(code)] = n
	}
	for _, r := range c.Refusals {
		u.Refusals = append(u.Refusals, protocol.EgressRefusal{Method: r.Method, Path: r.Path, Why: r.Why, Suggest: r.Suggest})
	}
	return u
}

func (p *publisher) run() {
	defer close(p.done)
	tick := time.NewTicker(dropReportEach)
	defer tick.Stop()
	for {
		select {
		case m := <-p.queue:
			p.publish(m)
		case <-tick.C:
			p.reportDrops()
		case <-p.stop:
			for { // what is queued still goes out
				select {
				case m := <-p.queue:
					p.publish(m)
				default:
					p.reportDrops()
					return
				}
			}
		}
	}
}

func (p *publisher) publish(r report) {
	b, err := json.Marshal(r.body)
	if err == nil {
		err = p.nc.Publish(r.subject, b)
	}
	if err != nil {
		p.dropped.Add(1)
	}
}

func (p *publisher) reportDrops() {
	if n := p.dropped.Swap(0); n > 0 {
		p.log.Warn("usage and egress reports dropped: the bus is unreachable or slower than the calls", "count", n)
	}
}

// close sends what is queued, drains the connection (bounded by its
// DrainTimeout) and closes it. Offers after close are dropped.
func (p *publisher) close() {
	close(p.stop)
	<-p.done
	closed := make(chan struct{})
	p.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := p.nc.Drain(); err != nil {
		p.nc.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		p.nc.Close()
	}
}

// status is the bus as /healthz reports it.
func (p *publisher) status() string {
	if p == nil {
		return "off"
	}
	if p.nc.IsConnected() {
		return "connected"
	}
	return "disconnected"
}
