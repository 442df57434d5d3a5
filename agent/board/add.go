package board

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// add puts a subtask on the board under a task the caller holds: in the
// same plan, in the caller's namespace ("<caller>/<id>": no plan file can
// name it, so no agent can take an ID the operator's plan uses or may use,
// nor another agent's), created by the caller (who may add at most its add
// quota, all told). An agent adds prompt tasks for anyone, and run tasks
// only for itself: a command for another agent to run comes from the
// operator alone.
func (s *Service) add(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if req.Plan == "" || req.Task == "" {
		return nil, refuse(protocol.BoardErrInvalid, "add: plan and task (the task the subtask is added under, which you hold) are required")
	}
	if len(req.Tasks) != 1 {
		return nil, refuse(protocol.BoardErrInvalid, "add: tasks must hold exactly one task spec (got %d)", len(req.Tasks))
	}
	spec := req.Tasks[0]
	// The ID is given bare, or with the caller's own prefix.
	if owner, id, named := strings.Cut(spec.ID, "/"); named {
		if owner != caller {
			return nil, refuse(protocol.BoardErrForbidden, "tasks[0].id: %q is not in %s's namespace: the tasks %s adds are %s", clip(spec.ID), caller, caller, protocol.BoardAgentTaskID(caller, "<id>"))
		}
		spec.ID = id
	}
	if err := spec.Validate("tasks[0]"); err != nil {
		return nil, refuse(protocol.BoardErrInvalid, "%s", err)
	}
	spec.ID = protocol.BoardAgentTaskID(caller, spec.ID)
	if i := slices.Index(spec.Needs, spec.ID); i >= 0 {
		return nil, refuse(protocol.BoardErrInvalid, "tasks[0].needs[%d]: a task cannot need itself (%q)", i, spec.ID)
	}
	if spec.Kind() == protocol.BoardKindRun && spec.Assignee != caller {
		return nil, refuse(protocol.BoardErrForbidden, "tasks[0]: a run task an agent adds must be assigned to itself (assignee %q): only the operator gives another agent a command to run", caller)
	}
	unlock := s.lockCaller(caller)
	defer unlock()
	viewer := s.viewer(caller)
	parentKey := protocol.BoardKey(req.Plan, req.Task)
	parent, ok, err := s.st.lookup(ctx, parentKey)
	if err == nil && (!ok || parent.Status != protocol.BoardClaimed || parent.Holder != caller) {
		parent, ok, err = s.st.fetch(ctx, parentKey) // the view may lag: the bucket decides
	}
	switch {
	case err != nil:
		return nil, err
	case !ok || !visible(viewer, parent):
		return nil, noTask(parentKey)
	case parent.Status != protocol.BoardClaimed || parent.Holder != caller:
		return nil, refuse(protocol.BoardErrNotHolder, "task %s is not held by %s: subtasks are added under a task one holds", parent.Key(), caller)
	}
	// A subtask builds only on tasks its adder may see: the claim of a task
	// carries its needs' results, so needing a task outside one's labels
	// (or assigned to another) would read its result. Such a need is
	// refused as if it did not exist, so that its existence leaks neither.
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
			// Only the caller creates keys of its namespace: this one is its own.
			return nil, refuse(protocol.BoardErrInvalid, "tasks[0].id: task %s already exists (you added it)", t.Key())
		}
		return nil, err
	}
	return &protocol.BoardReply{Task: &t}, nil
}
