package board

import (
	"context"
	"time"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// sweepLoop sweeps every SweepEvery until ctx ends. Every node sweeps: the
// writes are compare-and-set, so a task two nodes sweep at once moves once.
func (s *Service) sweepLoop(ctx context.Context) {
	defer s.bg.Done()
	pace.Every(ctx, s.opt.SweepEvery, func() bool { s.sweep(ctx); return true })
}

// sweep takes back the tasks whose lease ran out (ready again, or failed
// when that was their last attempt) and makes ready the blocked tasks
// whose needs are all done (a promotion that a completion's node missed).
func (s *Service) sweep(ctx context.Context) {
	now := s.now()
	expiring := s.quiet.allows(now, s.nc, s.lease())
	for _, t := range s.st.withStatus(protocol.BoardClaimed, func(t protocol.BoardTask) bool { return expiring && !t.LeaseUntil.After(now) }) {
		if ctx.Err() != nil {
			return
		}
		if _, err := s.expire(ctx, t.Key(), now); err != nil {
			s.log.Warn("board: expired lease not taken back", "task", t.Key(), "err", err)
		}
	}
	if now.Sub(s.pruned) >= pruneEvery {
		s.pruned = now
		s.pruneFinished(ctx, now)
	}
	// needsDone reads the view: not under the view's lock (where's keep).
	for _, t := range s.st.withStatus(protocol.BoardBlocked, nil) {
		if ctx.Err() != nil {
			return
		}
		if !s.needsDone(t) {
			continue
		}
		if err := s.promoteOnce(ctx, t.Key()); err != nil {
			s.log.Warn("board: blocked task not promoted", "task", t.Key(), "err", err)
		}
	}
}

// expire takes back a claimed task whose lease ran out by now: ready again
// (the attempt counted), or failed once it had its last attempt; failed
// too when it ran past its timeout (as its runtime fails a run task that
// does). Its dependents stay blocked, and say why.
func (s *Service) expire(ctx context.Context, key string, now time.Time) (protocol.BoardTask, error) {
	return s.change(ctx, key, func(t protocol.BoardTask) (protocol.BoardTask, error) {
		if t.Status != protocol.BoardClaimed || t.LeaseUntil.After(now) {
			return t, errUnchanged // completed, released or renewed meanwhile
		}
		why, timedOut := expiryReason(t, now, s.lease())
		if timedOut {
			t.Status, t.Reason, t.LeaseUntil = protocol.BoardFailed, bounded(why), time.Time{}
		} else {
			t = s.takeBack(t, why)
		}
		s.log.Info("board: claim ended", "task", t.Key(), "status", t.Status, "attempts", t.Attempts, "why", why)
		return t, nil
	})
}
