package top

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/roster"
	"github.com/ai-flock/ai-flock/protocol"
)

// Source is where the dashboard's figures come from: the bus, as the
// operator (BusSource); a test may give its own.
type Source interface {
	// Watch calls item for everything heard live (heartbeats, results,
	// events, dead letters) and budget for every ledger entry written,
	// until ctx ends; ready once both subscriptions stand.
	Watch(ctx context.Context, item func(operator.Item), budget func(protocol.LedgerEntry), ready func()) error
	// Look reads what the bus keeps; first says it is the first look.
	Look(ctx context.Context, first bool) Look
	// Logs asks an agent for its recent log lines.
	Logs(ctx context.Context, id string, lines int) (protocol.LogsReply, error)
}

// BusSource is the flock's bus, as the operator.
type BusSource struct {
	Op    *operator.Client
	Board *board.Client // the operator's board client
	// BoardEvery reads the board every that many looks (its list is the
	// largest answer); 1 when not above 0.
	BoardEvery int
	looks      int
}

// Watch implements Source.
func (b *BusSource) Watch(ctx context.Context, item func(operator.Item), budget func(protocol.LedgerEntry), ready func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	live := make(chan struct{})
	go func() { errs <- b.Op.WatchReady(ctx, item, func() { close(live) }) }()
	go func() {
		err := b.Op.WatchBudgets(ctx, budget, nil)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = nil // no gateway, no ledger: nothing to show
		}
		if err != nil {
			errs <- err
		}
	}()
	select {
	case <-live:
		if ready != nil {
			ready()
		}
	case err := <-errs:
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// Look implements Source. What fails is said in the look, never fatal: the
// dashboard goes on showing what it has.
func (b *BusSource) Look(ctx context.Context, first bool) Look {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	nc := b.Op.Conn()
	l := Look{Bus: Bus{Connected: nc.IsConnected(), URL: nc.ConnectedUrlRedacted(), Reconnects: nc.Stats().Reconnects}}
	if !l.Bus.Connected {
		l.Bus.Err = nc.Status().String()
		return l
	}
	if rtt, err := nc.RTT(); err == nil {
		l.Bus.RTT = rtt
	}
	// The roster every look: a redeploy's agents replace the earlier ones
	// while the dashboard runs.
	if r, err := roster.Ask(ctx, nc); err == nil {
		l.Roster = r.IDs()
	} else {
		l.Bus.Err = err.Error()
	}
	if first {
		if st, err := b.Op.Status(ctx, 0); err == nil {
			l.Status = st
		} else {
			l.Bus.Err = "agents: " + err.Error()
		}
	}
	if q, err := b.Op.Queues(ctx); err == nil {
		l.Queues, l.Bus.Pool = q.Agents, q.Pool
		l.Bus.Replicas, l.Bus.Current, l.Bus.Leader = q.Replicas, q.Current, q.Leader
	} else {
		l.Bus.Err = "queues: " + err.Error()
	}
	if n, err := b.Op.DeadCount(ctx); err == nil {
		l.Bus.Dead = n
	} else if l.Bus.Err == "" {
		l.Bus.Err = "dead letters: " + err.Error()
	}
	every := max(b.BoardEvery, 1)
	if b.Board != nil && b.looks%every == 0 {
		l.Board = boardLook(ctx, b.Board)
	}
	b.looks++
	return l
}

func boardLook(ctx context.Context, c *board.Client) *Board {
	tasks, err := c.List(ctx, "")
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return &Board{Err: "the flock's services do not answer"}
		}
		return &Board{Err: err.Error()}
	}
	out := &Board{ByStatus: map[string]int{}}
	plans := map[string]bool{}
	for _, t := range tasks {
		out.ByStatus[t.Status]++
		plans[t.Plan] = true
	}
	out.Plans = len(plans)
	return out
}

// Logs implements Source.
func (b *BusSource) Logs(ctx context.Context, id string, lines int) (protocol.LogsReply, error) {
	return b.Op.Logs(ctx, id, lines)
}
