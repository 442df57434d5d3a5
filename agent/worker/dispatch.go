package worker

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// ackWaitOf is the consumer's ack wait (30 s if unknown).
func ackWaitOf(c jetstream.Consumer) time.Duration {
	if info := c.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		return info.Config.AckWait
	}
	return 30 * time.Second
}

// ownLoop takes tasks from the agent's own consumer (tasks.<id>, tasks.all
// and tasks.pool.<id>, where the bus puts the pool tasks it gives this
// agent). The server lets at most CONCURRENCY of them be unacked, so
// prefetching them is safe.
func (a *Agent) ownLoop(ctx context.Context, cons jetstream.Consumer) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := cons.Messages(jetstream.PullMaxMessages(a.cfg.Concurrency))
		if err != nil {
			a.log.Warn("own consumer unavailable", "err", err)
			if !pace.Sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			if c, err := a.lookup(ctx, protocol.StreamTasks, protocol.AgentConsumer(a.cfg.ID)); err == nil {
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
					if c, err := a.lookup(ctx, protocol.StreamTasks, protocol.AgentConsumer(a.cfg.ID)); err == nil {
						cons = c
					}
				}
				pace.Sleep(ctx, backoff)
				break
			}
			if !a.slots.acquire(ctx, keep, func() { _ = msg.InProgress() }) {
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

// delivery is one delivered task, from either consumer.
type delivery interface {
	Data() []byte
	Subject() string
	Ack() error
	Nak() error
	InProgress() error
	Headers() nats.Header
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
