package board

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// pruneEvery is how often the sweeper looks for finished plans to remove:
// a pass reads every task in the view, which a one-second sweep should not.
const pruneEvery = time.Minute

// finished reports whether a task will not change again by itself.
func finished(t protocol.BoardTask) bool {
	switch t.Status {
	case protocol.BoardDone, protocol.BoardFailed, protocol.BoardCancelled:
		return true
	}
	return false
}

// removePlan (the operator's remove) deletes every task of a finished plan
// from the board, so the bucket, which is bounded, has room for the next
// ones. A plan with a task still ready, blocked or claimed is refused,
// naming how many: cancel them first.
func (s *Service) removePlan(ctx context.Context, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if req.Plan == "" {
		return nil, refuse(protocol.BoardErrInvalid, "plan: required")
	}
	tasks := s.st.ofPlan(req.Plan, nil)
	if len(tasks) == 0 {
		return nil, refuse(protocol.BoardErrNotFound, "no plan %s on the board", req.Plan)
	}
	unfinished := 0
	for _, t := range tasks {
		if !finished(t) {
			unfinished++
		}
	}
	if unfinished > 0 {
		return nil, refuse(protocol.BoardErrNotReady, "plan %s has %d of %d tasks not finished (ready, blocked or claimed): cancel them or wait, then remove it", req.Plan, unfinished, len(tasks))
	}
	rep := &protocol.BoardReply{V: protocol.Version}
	var failed error
	for _, t := range tasks {
		if err := s.deleteTask(ctx, t); err != nil {
			failed = errors.Join(failed, err)
			continue
		}
		rep.Changes = append(rep.Changes, protocol.BoardChange{Task: t.ID, Status: t.Status, Change: protocol.BoardDeleted})
	}
	if failed != nil {
		return nil, refuse(protocol.BoardErrConflict, "plan %s: %d of %d tasks removed, the rest changed or could not be written (%v): ask again", req.Plan, len(rep.Changes), len(tasks), failed)
	}
	s.removeArtifacts(ctx, req.Plan)
	s.log.Info("board: plan removed", "plan", req.Plan, "tasks", len(tasks))
	return rep, nil
}

// deleteTask deletes t's entry on the revision the view has, so a task that
// changed meanwhile (retried by the operator on another node) stays.
func (s *Service) deleteTask(ctx context.Context, t protocol.BoardTask) error {
	if err := s.st.kv.Delete(ctx, t.Key(), jetstream.LastRevision(t.Revision)); err != nil {
		return err
	}
	s.st.remove(t.Key(), math.MaxUint64) // the watcher's delete marker comes after
	return nil
}

// pruneFinished removes the plans whose every task is finished and whose
// last change is older than the configured keep (flock:board.keepFinished).
// Every node prunes; the deletes are compare-and-set, so a plan two nodes
// prune at once goes once, and a plan changed meanwhile stays.
func (s *Service) pruneFinished(ctx context.Context, now time.Time) {
	keep := time.Duration(s.keep.Load())
	if keep <= 0 {
		keep = protocol.DefaultBoardKeepFinished
	}
	type plan struct {
		tasks []protocol.BoardTask
		open  bool
		last  time.Time
	}
	plans := map[string]*plan{}
	for _, t := range s.st.all(nil) {
		p := plans[t.Plan]
		if p == nil {
			p = &plan{}
			plans[t.Plan] = p
		}
		p.tasks = append(p.tasks, t)
		p.open = p.open || !finished(t)
		// A task's last change is its update, or its creation if it has
		// none (an entry written by other means than the service).
		for _, at := range []time.Time{t.Created, t.Updated} {
			if at.After(p.last) {
				p.last = at
			}
		}
	}
	for id, p := range plans {
		if p.open || now.Sub(p.last) < keep || ctx.Err() != nil {
			continue
		}
		removed := 0
		for _, t := range p.tasks {
			if err := s.deleteTask(ctx, t); err == nil {
				removed++
			}
		}
		if removed == len(p.tasks) {
			s.removeArtifacts(ctx, id)
		}
		s.log.Info("board: finished plan pruned", "plan", id, "tasks", removed, "finished", p.last, "keep", keep.String())
	}
}
