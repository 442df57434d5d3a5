package worker

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// A claim on the board lasts a lease unrenewed (protocol.BoardConfig.Lease):
// the runtime is what says its agent is alive. It renews the run task it
// works (runBoard) and, with one request, the prompt tasks its program
// claimed through MCP, while that program runs: a program that died holds
// nothing for long. When the runtime starts it gives back what its agent
// held before (abandon), so the tasks of an agent that died are taken up
// again at once by the others, the attempt counted.

// abandonFor bounds the abandon at the start: a board that does not
// answer by then ends those claims at their lease instead.
const abandonFor = 5 * time.Second

// boardLease is the board's lease as its last reply said (the default
// before any).
func (a *Agent) boardLease() time.Duration {
	if d := time.Duration(a.leaseNS.Load()); d > 0 {
		return d
	}
	return protocol.DefaultBoardLease
}

// learnLease keeps the lease a board reply carries.
func (a *Agent) learnLease(rep *protocol.BoardReply) {
	if rep != nil && rep.Lease > 0 {
		a.leaseNS.Store(int64(rep.Lease))
	}
}

// renewEvery is how often a claim is renewed: three times a lease, so two
// renewals lost in a row still keep it.
func (a *Agent) renewEvery() time.Duration { return a.boardLease() / 3 }

// abandonClaims gives back the claims the agent held before this runtime
// started (a crash, a killed container), before it claims anything.
func (a *Agent) abandonClaims(ctx context.Context) {
	cl := board.NewAgentClient(a.nc, a.cfg.ID)
	actx, cancel := context.WithTimeout(ctx, abandonFor)
	defer cancel()
	rep, err := cl.Abandon(actx)
	switch {
	case err == nil:
		a.learnLease(rep)
		for _, t := range rep.Tasks {
			a.log.Info("board: a claim held before this start given back", "board", t.Key(), "status", t.Status, "reason", t.Reason)
			a.event(protocol.EventBoardReleased, t.Key(), clip("given back at start: "+t.Reason, 512))
		}
	case errors.Is(err, nats.ErrNoResponders):
		a.log.Debug("board: no board service answers: nothing given back", "err", err)
	default:
		a.log.Warn("board: claims held before this start not given back: their lease ends them", "err", err)
	}
}

// holdLoop renews the prompt tasks the agent holds, every third of a
// lease, while its program runs (or, with no program, while the runtime
// does: a task's process may have claimed them), until ctx ends.
func (a *Agent) holdLoop(ctx context.Context) {
	cl := board.NewAgentClient(a.nc, a.cfg.ID)
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.renewEvery()):
		}
		if len(a.cfg.Program) > 0 && !a.programUp.Load() {
			continue // its claims lapse within a lease: nobody works them
		}
		rctx, cancel := context.WithTimeout(ctx, boardRequestTimeout)
		rep, err := cl.RenewAll(rctx, protocol.BoardKindPrompt)
		cancel()
		switch {
		case err == nil:
			a.learnLease(rep)
			lastErr = ""
			if len(rep.Tasks) > 0 {
				a.log.Debug("board: prompt claims renewed", "tasks", len(rep.Tasks))
			}
		case errors.Is(err, nats.ErrNoResponders) || ctx.Err() != nil:
		case err.Error() != lastErr:
			lastErr = err.Error()
			a.log.Warn("board: prompt claims not renewed: trying again", "err", err, "in", a.renewEvery().String())
		}
	}
}
