package board

import (
	"context"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// cancelTask cancels a task that is not done (a claimed one too: its
// holder's complete is then refused). Cancelling a cancelled task changes
// nothing.
func (s *Service) cancelTask(ctx context.Context, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := needTask(protocol.BoardOpCancel, req); err != nil {
		return nil, err
	}
	t, err := s.change(ctx, protocol.BoardKey(req.Plan, req.Task), func(t protocol.BoardTask) (protocol.BoardTask, error) {
		switch t.Status {
		case protocol.BoardDone:
			return t, refuse(protocol.BoardErrNotReady, "task %s is done: a done task stays done", t.Key())
		case protocol.BoardCancelled:
			return t, errUnchanged
		}
		t.Status, t.LeaseUntil = protocol.BoardCancelled, time.Time{}
		t.Reason = "cancelled by the operator"
		if req.Reason != "" {
			t.Reason = bounded(t.Reason + ": " + req.Reason)
		}
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	return &protocol.BoardReply{Task: &t}, nil
}

// retry puts a failed or cancelled task back: ready (or blocked, by its
// needs), its attempts, holder, lease and result cleared.
func (s *Service) retry(ctx context.Context, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := needTask(protocol.BoardOpRetry, req); err != nil {
		return nil, err
	}
	t, err := s.change(ctx, protocol.BoardKey(req.Plan, req.Task), func(t protocol.BoardTask) (protocol.BoardTask, error) {
		if t.Status != protocol.BoardFailed && t.Status != protocol.BoardCancelled {
			return t, refuse(protocol.BoardErrNotReady, "task %s is %s: only a failed or cancelled task is retried", t.Key(), t.Status)
		}
		return s.restart(t), nil
	})
	if err != nil {
		return nil, err
	}
	t = s.shown(t)
	return &protocol.BoardReply{Task: &t}, nil
}

// restart is t as new: waiting by its needs, nothing of its runs kept.
func (s *Service) restart(t protocol.BoardTask) protocol.BoardTask {
	t.Status = s.waitingStatus(t)
	t.Attempts, t.Holder, t.LeaseUntil, t.Result, t.Reason = 0, "", time.Time{}, nil, ""
	return t
}
