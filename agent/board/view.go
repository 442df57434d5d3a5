package board

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/ai-flock/ai-flock/protocol"
)

// replyMargin leaves room in a reply for the envelope and headers.
const replyMargin = 4 << 10

// viewer is who asks to see tasks: the operator (every task), or an agent
// (the tasks it could take, holds or held, or added).
func (s *Service) viewer(caller string) protocol.BoardAgent {
	if caller == protocol.OperatorUser {
		return protocol.BoardAgent{ID: caller}
	}
	return s.agent(caller)
}

// list returns the tasks the caller may see, of the plan and statuses
// asked for, oldest first, each blocked one saying what blocks it. A list
// too large for one message is sent without the tasks' prompts and
// commands (show has them); one still too large is refused.
func (s *Service) list(caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	v := s.viewer(caller)
	keep := func(t protocol.BoardTask) bool {
		return (req.Plan == "" || t.Plan == req.Plan) && (len(req.Status) == 0 || slices.Contains(req.Status, t.Status)) && visible(v, t)
	}
	var tasks []protocol.BoardTask
	if req.Plan != "" {
		tasks = s.st.ofPlan(req.Plan, keep)
	} else {
		tasks = s.st.all(keep)
	}
	slices.SortFunc(tasks, byAge)
	for i := range tasks {
		tasks[i] = s.shown(tasks[i])
	}
	rep := &protocol.BoardReply{Tasks: tasks}
	limit := int(s.nc.MaxPayload()) - replyMargin
	if size(rep) <= limit {
		return rep, nil
	}
	for i := range tasks {
		tasks[i].Prompt, tasks[i].Run = "", nil
	}
	if n := size(rep); n > limit {
		return nil, refuse(protocol.BoardErrLimit, "%d tasks make a %d-byte list, over the bus's %d-byte messages: list one plan, or some statuses", len(tasks), n, limit+replyMargin)
	}
	return rep, nil
}

func size(rep *protocol.BoardReply) int {
	b, _ := json.Marshal(rep)
	return len(b)
}

// show returns one task. An agent is told a task it may not see does not
// exist, as one that does not.
func (s *Service) show(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if err := needTask(protocol.BoardOpShow, req); err != nil {
		return nil, err
	}
	key := protocol.BoardKey(req.Plan, req.Task)
	t, ok, err := s.st.lookup(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok || !visible(s.viewer(caller), t) {
		return nil, refuse(protocol.BoardErrNotFound, "no task %s", key)
	}
	t = s.shown(t)
	return &protocol.BoardReply{Task: &t}, nil
}
