package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// poolPoll is how long one pool fetch waits for work.
const poolPoll = 10 * time.Second

// ackWaitOf is the consumer's ack wait (30 s if unknown).
func ackWaitOf(c jetstream.Consumer) time.Duration {
	if info := c.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		return info.Config.AckWait
	}
	return 30 * time.Second
}

// ownLoop takes tasks from the agent's own consumer (tasks.<id> and
// tasks.all). The server lets at most CONCURRENCY of them be unacked, so
// prefetching them is safe.
func (a *Agent) ownLoop(ctx context.Context, cons jetstream.Consumer) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := cons.Messages(jetstream.PullMaxMessages(a.cfg.Concurrency))
		if err != nil {
			a.log.Warn("own consumer unavailable", "err", err)
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			if c, err := a.lookup(ctx, protocol.AgentConsumer(a.cfg.ID)); err == nil {
				cons = c
			}
			continue
		}
		backoff = 100 * time.Millisecond
		keep := ackWaitOf(cons) / 3
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				if ctx.Err() != nil {
					a.handBackBuffered(it)
					return
				}
				a.log.Warn("own consumer interrupted", "err", err)
				it.Stop()
				if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
					if c, err := a.lookup(ctx, protocol.AgentConsumer(a.cfg.ID)); err == nil {
						cons = c
					}
				}
				sleepCtx(ctx, backoff)
				break
			}
			if !a.slots.acquireOwn(ctx, keep, func() { _ = msg.InProgress() }) {
				_ = msg.Nak()
				a.handBackBuffered(it)
				return
			}
			a.inflight.Add(1)
			go a.handle(jsDelivery{msg}, keep)
		}
	}
}

// handBackBuffered returns the own tasks that arrived but never started.
func (a *Agent) handBackBuffered(it jetstream.MessagesContext) {
	if !a.nc.IsConnected() {
		// No bus to hand anything back to: the unacked tasks come back to
		// this consumer after their ack wait. A drain would only wait.
		it.Stop()
		return
	}
	it.Drain()
	for {
		msg, err := it.Next(jetstream.NextMaxWait(200 * time.Millisecond))
		if err != nil {
			return
		}
		_ = msg.Nak()
	}
}

// poolLoop fetches pool tasks for the slots that are free right now.
func (a *Agent) poolLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	keep := a.poolKeep
	for {
		if ctx.Err() != nil { // draining: take no more pool tasks
			return
		}
		n, fctx := a.slots.reservePool(ctx)
		if n == 0 {
			return
		}
		err := a.pullPool(fctx, n, func(d delivery) {
			a.slots.usePool()
			if a.draining.Load() {
				_ = d.Nak()
				a.slots.release()
				return
			}
			a.inflight.Add(1)
			go a.handle(d, keep)
		})
		a.slots.endPool()
		if err != nil {
			a.log.Warn("pool fetch failed", "err", err)
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// pullPool sends one pull request for up to n pool tasks and hands each to
// deliver. It ends when n arrived, the request expired, or ctx was cancelled
// (an own task preempted the wait). Ending is race-free: the reply
// subscription is drained, so a task the server sent before it saw the
// unsubscribe is still delivered here, never dropped on the floor to wait
// out its ack deadline. The server never sends more than n, so every
// delivered task has its reserved slot.
func (a *Agent) pullPool(ctx context.Context, n int, deliver func(delivery)) error {
	inbox := a.nc.NewInbox()
	ch := make(chan *nats.Msg, n+16)
	sub, err := a.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return err
	}
	closed := make(chan struct{})
	sub.SetClosedHandler(func(string) { close(closed) })
	req, _ := json.Marshal(map[string]any{"batch": n, "expires": poolPoll.Nanoseconds()})
	if err := a.nc.PublishRequest(poolNextSubject, inbox, req); err != nil {
		_ = sub.Unsubscribe()
		return err
	}
	got := 0
	var status string
	take := func(m *nats.Msg) (over bool) {
		if st := m.Header.Get("Status"); st != "" {
			if st == "100" { // idle heartbeat
				return false
			}
			status = st + " " + m.Header.Get("Description")
			return true
		}
		got++
		deliver(a.rawDelivery(m))
		return got >= n
	}
	timer := time.NewTimer(poolPoll + time.Second)
	defer timer.Stop()
wait:
	for {
		select {
		case m := <-ch:
			if take(m) {
				break wait
			}
		case <-ctx.Done():
			break wait
		case <-timer.C:
			break wait
		}
	}
	// Drain only over a live connection: with the bus gone nothing more can
	// arrive, and a drain would wait out its timeout on every round.
	if !a.nc.IsConnected() {
		_ = sub.Unsubscribe()
	} else if err := sub.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
		}
	}
	for {
		select {
		case m := <-ch:
			if m.Header.Get("Status") == "" && got < n {
				got++
				deliver(a.rawDelivery(m))
			}
		default:
			// 408: the request expired; 404: nothing to deliver. Anything
			// else (409 consumer deleted or too many waiting, 503 no such
			// consumer) is a problem worth backing off for.
			if status != "" && !strings.HasPrefix(status, "408") && !strings.HasPrefix(status, "404") {
				return fmt.Errorf("pool pull request refused: %s", strings.TrimSpace(status))
			}
			return nil
		}
	}
}

var poolNextSubject = "$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamTasks + "." + protocol.ConsumerPool

// delivery is one delivered task, from either consumer.
type delivery interface {
	Data() []byte
	Subject() string
	Ack() error
	Nak() error
	InProgress() error
	// Meta is the task's stream sequence and delivery count.
	Meta() (seq uint64, delivered int)
}

type jsDelivery struct{ jetstream.Msg }

func (d jsDelivery) Meta() (uint64, int) {
	if m, err := d.Metadata(); err == nil {
		return m.Sequence.Stream, int(m.NumDelivered)
	}
	return 0, 0
}

type rawMsg struct {
	m  *nats.Msg
	nc *nats.Conn
}

func (a *Agent) rawDelivery(m *nats.Msg) delivery { return rawMsg{m: m, nc: a.nc} }

func (d rawMsg) Data() []byte      { return d.m.Data }
func (d rawMsg) Subject() string   { return d.m.Subject }
func (d rawMsg) Ack() error        { return d.nc.Publish(d.m.Reply, []byte("+ACK")) }
func (d rawMsg) Nak() error        { return d.nc.Publish(d.m.Reply, []byte("-NAK")) }
func (d rawMsg) InProgress() error { return d.nc.Publish(d.m.Reply, []byte("+WPI")) }
func (d rawMsg) Meta() (uint64, int) {
	if m, err := d.m.Metadata(); err == nil {
		return m.Sequence.Stream, int(m.NumDelivered)
	}
	return 0, 0
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
