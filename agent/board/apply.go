package board

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// removedReason is why a task the plan file no longer has was cancelled.
const removedReason = protocol.BoardRemovedReason

// applyWorkers: tasks of one plan written at once.
const applyWorkers = 8

// apply writes a plan: the whole file is checked first (nothing is written
// when anything is wrong, and the error lists every problem), then each
// task is created, left unchanged, updated (a task not started yet:
// blocked or ready, its status worked out again) or kept as it is (one
// claimed, done, failed or cancelled: Why says so). The operator's tasks of
// the plan that the file no longer has are cancelled when not started yet
// and kept otherwise; the subtasks agents added are not the file's, and
// stay. Applying the same file again changes nothing.
func (s *Service) apply(ctx context.Context, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	plan := protocol.BoardPlan{Plan: req.Plan, Tasks: req.Tasks}
	if err := plan.Validate(); err != nil {
		return nil, refuse(protocol.BoardErrInvalid, "the plan is not applied: %d problem(s):\n%s", len(protocol.Problems(err)), err)
	}
	// The file's order is the order of creation: claims take the oldest
	// first, so a plan's ready tasks go in the order they are written.
	start := s.now()
	changes := make([]protocol.BoardChange, len(plan.Tasks))
	errs := make([]error, len(plan.Tasks))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(applyWorkers, len(plan.Tasks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				changes[i], errs[i] = s.applyTask(ctx, plan.Plan, plan.Tasks[i], start.Add(time.Duration(i)))
			}
		}()
	}
	for i := range plan.Tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	rep := &protocol.BoardReply{Changes: changes}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("plan %s partly applied (apply it again): %w", plan.Plan, err)
	}
	inFile := map[string]bool{}
	for _, t := range plan.Tasks {
		inFile[t.ID] = true
	}
	gone := s.st.ofPlan(plan.Plan, func(t protocol.BoardTask) bool {
		return !inFile[t.ID] && t.CreatedBy == protocol.OperatorUser && t.Status != protocol.BoardCancelled
	})
	slices.SortFunc(gone, byAge)
	for _, g := range gone {
		c, err := s.removeTask(ctx, g.Key())
		if err != nil {
			return rep, fmt.Errorf("plan %s partly applied (apply it again): %w", plan.Plan, err)
		}
		rep.Changes = append(rep.Changes, c)
	}
	return rep, nil
}

// applyTask applies one task of the file.
func (s *Service) applyTask(ctx context.Context, plan string, spec protocol.BoardTaskSpec, created time.Time) (protocol.BoardChange, error) {
	key := protocol.BoardKey(plan, spec.ID)
	c := protocol.BoardChange{Task: spec.ID}
	lookup := s.st.lookup
	for range maxConflicts {
		cur, ok, err := lookup(ctx, key)
		lookup = s.st.fetch // after a conflict, the bucket's
		if err != nil {
			return c, err
		}
		revive := ok && cur.Status == protocol.BoardCancelled && cur.Reason == removedReason
		var next protocol.BoardTask
		switch {
		case !ok:
			next = protocol.BoardTask{Plan: plan, BoardTaskSpec: spec, CreatedBy: protocol.OperatorUser, Created: created}
			next.Status = s.waitingStatus(next)
			c.Change = protocol.BoardCreated
		case sameSpec(cur.BoardTaskSpec, spec) && !revive:
			c.Change, c.Status = protocol.BoardUnchanged, cur.Status
			return c, nil
		case cur.Status == protocol.BoardBlocked || cur.Status == protocol.BoardReady || revive:
			// Not started yet (or taken off the plan before it started, and
			// back in it now): the file's spec, the status worked out again.
			next = cur
			next.BoardTaskSpec = spec
			if revive {
				next = s.restart(next)
			} else {
				next.Status, next.Reason = s.waitingStatus(next), ""
			}
			c.Change = protocol.BoardUpdated
		default:
			c.Change, c.Status, c.Why = protocol.BoardKept, cur.Status, keptWhy(cur)
			return c, nil
		}
		var prev *protocol.BoardTask
		if ok {
			prev = &cur
		}
		if err := s.write(ctx, prev, &next); err != nil {
			if conflict(err) {
				continue
			}
			return c, fmt.Errorf("tasks %s: %w", spec.ID, err)
		}
		c.Status = next.Status
		return c, nil
	}
	return c, refuse(protocol.BoardErrConflict, "task %s changed under the apply %d times: apply again", key, maxConflicts)
}

// keptWhy says why an edit of a task that has started was not applied.
func keptWhy(t protocol.BoardTask) string {
	switch t.Status {
	case protocol.BoardClaimed:
		return fmt.Sprintf("claimed by %s: a task being worked is not edited (apply again once it is back, or cancel and retry it)", t.Holder)
	case protocol.BoardDone:
		return "done: a done task is not edited (a new ID makes a new task)"
	default:
		return fmt.Sprintf("%s: retry it, then apply again to edit it", t.Status)
	}
}

// removeTask cancels a task the plan no longer has, if it has not started.
func (s *Service) removeTask(ctx context.Context, key string) (protocol.BoardChange, error) {
	changed := false
	t, err := s.change(ctx, key, func(t protocol.BoardTask) (protocol.BoardTask, error) {
		if t.Status != protocol.BoardBlocked && t.Status != protocol.BoardReady {
			changed = false
			return t, errUnchanged
		}
		changed = true
		t.Status, t.Reason = protocol.BoardCancelled, removedReason
		return t, nil
	})
	c := protocol.BoardChange{Task: t.ID, Status: t.Status}
	switch {
	case err != nil:
		return c, err
	case changed:
		c.Change = protocol.BoardRemoved
	case t.Status == protocol.BoardCancelled:
		c.Change = protocol.BoardUnchanged
	default:
		c.Change, c.Why = protocol.BoardKept, fmt.Sprintf("not in the plan any more, but %s: kept", t.Status)
	}
	return c, nil
}
