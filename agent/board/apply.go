package board

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
//
// A task of the file that is on the board but was not created by the
// operator (an agent's subtask under that ID, left from before agents'
// subtasks had a namespace of their own) is never adopted: the apply is
// refused whole, naming each such task and who created it.
//
// dry: the same checks, and the changes the apply would make (a task it
// would refuse as "refused"), written nowhere.
func (s *Service) apply(ctx context.Context, req protocol.BoardRequest, dry bool) (*protocol.BoardReply, error) {
	plan := protocol.BoardPlan{Plan: req.Plan, Tasks: req.Tasks}
	if err := plan.Validate(); err != nil {
		return nil, refuse(protocol.BoardErrInvalid, "the plan is not applied: %d problem(s):\n%s", len(protocol.Problems(err)), err)
	}
	// The file's order is the order of creation: claims take the oldest
	// first, so a plan's ready tasks go in the order they are written.
	start := s.now()
	if dry {
		return s.dryRun(ctx, plan, start)
	}
	if err := s.adopts(plan); err != nil {
		return nil, err
	}
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
	for _, g := range s.gone(plan) {
		c, err := s.removeTask(ctx, g.Key())
		if err != nil {
			return rep, fmt.Errorf("plan %s partly applied (apply it again): %w", plan.Plan, err)
		}
		rep.Changes = append(rep.Changes, c)
	}
	return rep, nil
}

// dryRun is apply's answer without its writes: the change each task of the
// file would see, then each task the file no longer has; and apply's
// refusal when it would refuse (the changes come with it, the tasks it
// would not adopt as "refused").
func (s *Service) dryRun(ctx context.Context, plan protocol.BoardPlan, start time.Time) (*protocol.BoardReply, error) {
	rep := &protocol.BoardReply{Changes: make([]protocol.BoardChange, 0, len(plan.Tasks))}
	for i, spec := range plan.Tasks {
		cur, ok, err := s.st.lookup(ctx, protocol.BoardKey(plan.Plan, spec.ID))
		if err != nil {
			return nil, err
		}
		if ok && cur.CreatedBy != protocol.OperatorUser {
			rep.Changes = append(rep.Changes, protocol.BoardChange{Task: spec.ID, Change: protocol.BoardRefused, Status: cur.Status, Why: notAdopted(cur)})
			continue
		}
		_, c := s.applyStep(plan.Plan, spec, cur, ok, start.Add(time.Duration(i)))
		rep.Changes = append(rep.Changes, c)
	}
	for _, g := range s.gone(plan) {
		_, c := removal(g)
		rep.Changes = append(rep.Changes, c)
	}
	return rep, s.adopts(plan)
}

// adopts refuses a plan any of whose tasks is on the board created by
// another than the operator, naming each and who created it. The view has
// every such task: only an agent's add from before namespaces made one.
func (s *Service) adopts(plan protocol.BoardPlan) error {
	var not []string
	for i, spec := range plan.Tasks {
		if cur, ok := s.st.get(protocol.BoardKey(plan.Plan, spec.ID)); ok && cur.CreatedBy != protocol.OperatorUser {
			not = append(not, fmt.Sprintf("tasks[%d]: task %s (%s) %s", i, cur.Key(), cur.Status, notAdopted(cur)))
		}
	}
	if len(not) == 0 {
		return nil
	}
	return refuse(protocol.BoardErrForbidden, "the plan is not applied: %d of its tasks are on the board but were not created by the operator, and apply adopts none (give the file's task another ID, or remove the plan once it is finished):\n%s",
		len(not), strings.Join(not, "\n"))
}

// notAdopted says why apply does not take t as the file's task.
func notAdopted(t protocol.BoardTask) string {
	return fmt.Sprintf("was created by %s, not the operator: apply does not adopt it", t.CreatedBy)
}

// gone is the operator's tasks of the plan, not cancelled, that the file no
// longer has, oldest first.
func (s *Service) gone(plan protocol.BoardPlan) []protocol.BoardTask {
	inFile := map[string]bool{}
	for _, t := range plan.Tasks {
		inFile[t.ID] = true
	}
	gone := s.st.ofPlan(plan.Plan, func(t protocol.BoardTask) bool {
		return !inFile[t.ID] && t.CreatedBy == protocol.OperatorUser && t.Status != protocol.BoardCancelled
	})
	slices.SortFunc(gone, byAge)
	return gone
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
		if ok && cur.CreatedBy != protocol.OperatorUser {
			// adopts let it through: written a moment ago (no board of this
			// version writes one); still never adopted.
			return c, refuse(protocol.BoardErrForbidden, "task %s %s", key, notAdopted(cur))
		}
		next, c := s.applyStep(plan, spec, cur, ok, created)
		if next == nil {
			return c, nil
		}
		var prev *protocol.BoardTask
		if ok {
			prev = &cur
		}
		if err := s.write(ctx, prev, next); err != nil {
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

// applyStep is what applying spec does to the operator's task as it stands
// (cur, when ok): the version to write (nil: none) and the change.
func (s *Service) applyStep(plan string, spec protocol.BoardTaskSpec, cur protocol.BoardTask, ok bool, created time.Time) (*protocol.BoardTask, protocol.BoardChange) {
	c := protocol.BoardChange{Task: spec.ID}
	revive := ok && cur.Status == protocol.BoardCancelled && cur.Reason == removedReason
	var next protocol.BoardTask
	switch {
	case !ok:
		next = protocol.BoardTask{Plan: plan, BoardTaskSpec: spec, CreatedBy: protocol.OperatorUser, Created: created}
		next.Status = s.waitingStatus(next)
		c.Change = protocol.BoardCreated
	case sameSpec(cur.BoardTaskSpec, spec) && !revive:
		c.Change, c.Status = protocol.BoardUnchanged, cur.Status
		return nil, c
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
		return nil, c
	}
	c.Status = next.Status
	return &next, c
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
	var c protocol.BoardChange
	t, err := s.change(ctx, key, func(t protocol.BoardTask) (protocol.BoardTask, error) {
		var next *protocol.BoardTask
		if next, c = removal(t); next == nil {
			return t, errUnchanged
		}
		return *next, nil
	})
	if err != nil {
		return protocol.BoardChange{Task: t.ID, Status: t.Status}, err
	}
	return c, nil
}

// removal is what taking t off its plan does: cancelled when it has not
// started (the version to write), else nothing (nil) and the change says
// why.
func removal(t protocol.BoardTask) (*protocol.BoardTask, protocol.BoardChange) {
	c := protocol.BoardChange{Task: t.ID, Status: t.Status}
	switch t.Status {
	case protocol.BoardBlocked, protocol.BoardReady:
		t.Status, t.Reason = protocol.BoardCancelled, removedReason
		c.Change, c.Status = protocol.BoardRemoved, t.Status
		return &t, c
	case protocol.BoardCancelled:
		c.Change = protocol.BoardUnchanged
	default:
		c.Change, c.Why = protocol.BoardKept, fmt.Sprintf("not in the plan any more, but %s: kept", t.Status)
	}
	return nil, c
}
