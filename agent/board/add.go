package board

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// add puts a subtask on the board under a task the caller holds: in the
// same plan, under a new ID, created by the caller (who may add at most its
// add quota, all told). An agent adds prompt tasks for anyone, and run
// tasks only for itself: a command for another agent to run comes from the
// operator alone.
func (s *Service) add(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if req.Plan == "" || req.Task == "" {
		return nil, refuse(protocol.BoardErrInvalid, "add: plan and task (the task the subtask is added under, which you hold) are required")
	}
	if len(req.Tasks) != 1 {
		return nil, refuse(protocol.BoardErrInvalid, "add: tasks must hold exactly one task spec (got %d)", len(req.Tasks))
	}
	spec := req.Tasks[0]
	if err := spec.Validate("tasks[0]"); err != nil {
		return nil, refuse(protocol.BoardErrInvalid, "%s", err)
	}
	if spec.Kind() == protocol.BoardKindRun && spec.Assignee != caller {
		return nil, refuse(protocol.BoardErrForbidden, "tasks[0]: a run task an agent adds must be assigned to itself (assignee %q): only the operator gives another agent a command to run", caller)
	}
	unlock := s.lockCaller(caller)
	defer unlock()
	parentKey := protocol.BoardKey(req.Plan, req.Task)
	parent, ok, err := s.st.lookup(ctx, parentKey)
	if err == nil && (!ok || parent.Status != protocol.BoardClaimed || parent.Holder != caller) {
		parent, ok, err = s.st.fetch(ctx, parentKey) // the view may lag: the bucket decides
	}
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, refuse(protocol.BoardErrNotFound, "no task %s", protocol.BoardKey(req.Plan, req.Task))
	case parent.Status != protocol.BoardClaimed || parent.Holder != caller:
		return nil, refuse(protocol.BoardErrNotHolder, "task %s is not held by %s: subtasks are added under a task one holds", parent.Key(), caller)
	}
	// A subtask builds only on tasks its adder may see: the claim of a task
	// carries its needs' results, so needing a task outside one's labels
	// (or assigned to another) would read its result. Such a need is
	// refused as if it did not exist, so that its existence leaks neither.
	viewer := s.viewer(caller)
	for i, n := range spec.Needs {
		if need, ok, err := s.st.lookup(ctx, protocol.BoardKey(req.Plan, n)); err != nil {
			return nil, err
		} else if !ok || !visible(viewer, need) {
			return nil, refuse(protocol.BoardErrInvalid, "tasks[0].needs[%d]: %q is not a task of plan %s", i, n, req.Plan)
		}
	}
	a := s.agent(caller)
	if n := s.st.createdBy(caller); n >= *a.AddQuota {
		return nil, refuse(protocol.BoardErrLimit, "%s has added %d task(s), its quota is %d", caller, n, *a.AddQuota)
	}
	t := protocol.BoardTask{Plan: req.Plan, BoardTaskSpec: spec, Parent: parent.ID, CreatedBy: caller, Created: s.now()}
	t.Status = s.waitingStatus(t)
	if err := s.write(ctx, nil, &t); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, refuse(protocol.BoardErrInvalid, "tasks[0].id: task %s already exists", t.Key())
		}
		return nil, err
	}
	return &protocol.BoardReply{Task: &t}, nil
}
