package board

import (
	"context"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// holderOp is renew, complete, fail or release: only the task's holder may,
// and only while the task is claimed.
func (s *Service) holderOp(ctx context.Context, caller, op string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := needTask(op, req); err != nil {
		return nil, err
	}
	t, err := s.change(ctx, protocol.BoardKey(req.Plan, req.Task), func(t protocol.BoardTask) (protocol.BoardTask, error) {
		switch {
		case !visible(s.viewer(caller), t):
			return t, noTask(t.Key()) // neither its status nor its holder
		case t.Status != protocol.BoardClaimed:
			return t, refuse(protocol.BoardErrNotReady, "task %s is %s, not claimed: there is nothing to %s", t.Key(), t.Status, op)
		case t.Holder != caller:
			return t, refuse(protocol.BoardErrNotHolder, "task %s is held by another agent, not %s", t.Key(), caller)
		}
		now := s.now()
		switch op {
		case protocol.BoardOpRenew:
			return s.renewed(t, now)
		case protocol.BoardOpComplete:
			t.Status, t.LeaseUntil, t.Reason, t.Result = protocol.BoardDone, time.Time{}, "", req.Result
		case protocol.BoardOpFail:
			t.Status, t.LeaseUntil, t.Result = protocol.BoardFailed, time.Time{}, req.Result
			t.Reason = req.Reason
			if t.Reason == "" {
				t.Reason = "failed by " + caller
			}
		case protocol.BoardOpRelease:
			t.Status, t.Holder, t.LeaseUntil = protocol.BoardReady, "", time.Time{}
			t.Attempts = max(t.Attempts-1, 0) // a release is not a failed attempt
			t.Reason = "released by " + caller
			if req.Reason != "" {
				t.Reason = bounded(t.Reason + ": " + req.Reason)
			}
		}
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	if op == protocol.BoardOpComplete {
		s.promoteDependents(ctx, t)
	}
	return &protocol.BoardReply{Task: &t, Lease: protocol.Duration(s.lease())}, nil
}

// promoteDependents makes ready the blocked tasks of done's plan that need
// it and whose needs are now all done. One this misses (a write lost, this
// node gone) the sweeper promotes.
func (s *Service) promoteDependents(ctx context.Context, done protocol.BoardTask) {
	for _, t := range s.st.needing(done.Key(), func(t protocol.BoardTask) bool { return t.Status == protocol.BoardBlocked }) {
		if err := s.promoteOnce(ctx, t.Key()); err != nil {
			s.log.Warn("board: dependent not promoted (the sweeper will)", "task", t.Key(), "err", err)
		}
	}
}

// promote makes a blocked task whose needs are all done ready.
func (s *Service) promote(ctx context.Context, key string) (protocol.BoardTask, error) {
	return s.change(ctx, key, func(t protocol.BoardTask) (protocol.BoardTask, error) {
		if t.Status != protocol.BoardBlocked || !s.needsDone(t) {
			return t, errUnchanged
		}
		t.Status, t.Reason = protocol.BoardReady, ""
		return t, nil
	})
}

// promotion is a promote of one task under way on this node.
type promotion struct {
	again bool          // a need of the task completed meanwhile: look again once done
	done  chan struct{} // closed when the promotion is over
}

// promoteOnce is promote, one at a time for a task on this node. The
// completions of a task's last two needs both find it blocked with its
// needs done: both would write its promotion, and one lose the
// compare-and-set (a write, and a read of the bucket, on its reply's
// path). The one that finds a promotion under way asks it to look again
// once it is done (what it read may predate this completion) and waits for
// it: the reply to a completion still comes after the promotions it made
// due. Promotions on other nodes are settled by compare-and-set.
func (s *Service) promoteOnce(ctx context.Context, key string) error {
	s.promMu.Lock()
	if p, busy := s.promoting[key]; busy {
		p.again = true
		s.promMu.Unlock()
		select {
		case <-p.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p := &promotion{done: make(chan struct{})}
	s.promoting[key] = p
	s.promMu.Unlock()
	defer func() {
		s.promMu.Lock()
		delete(s.promoting, key)
		s.promMu.Unlock()
		close(p.done)
	}()
	for {
		_, err := s.promote(ctx, key)
		s.promMu.Lock()
		again := p.again
		p.again = false
		s.promMu.Unlock()
		if !again {
			return err // a promotion that failed, the sweeper makes
		}
	}
}
