package board

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

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

// list returns a page of the tasks the caller may see, of the plan and
// statuses asked for, oldest first, each blocked one saying what blocks it:
// the tasks after req.After, as many as fit the caller's page
// (protocol.BoardAgentPageBytes for an agent, the bus's largest message
// for the operator) up to req.Limit, and Next when more follow. A task too
// large for a page of its own is sent without its prompt and command (show
// has them). Pages keep every reply small, so that no agent asking often
// for a long list holds the bus or the services' memory.
func (s *Service) list(caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	after, err := parseCursor(req.After)
	if err != nil {
		return nil, err
	}
	v := s.viewer(caller)
	keep := func(t protocol.BoardTask) bool {
		return (req.Plan == "" || t.Plan == req.Plan) && (len(req.Status) == 0 || slices.Contains(req.Status, t.Status)) && visible(v, t) &&
			(after == nil || byAge(*after, t) < 0)
	}
	var tasks []protocol.BoardTask
	if req.Plan != "" {
		tasks = s.st.ofPlan(req.Plan, keep)
	} else {
		tasks = s.st.all(keep)
	}
	slices.SortFunc(tasks, byAge)
	budget := protocol.BoardAgentPageBytes - replyMargin
	if caller == protocol.OperatorUser {
		budget = int(s.nc.MaxPayload()) - replyMargin
	}
	rep := &protocol.BoardReply{Tasks: []protocol.BoardTask{}}
	used := 0
	for i, t := range tasks {
		if req.Limit > 0 && len(rep.Tasks) == req.Limit {
			rep.Next = cursor(tasks[i-1])
			break
		}
		t = s.shown(t)
		n := taskSize(t)
		if n > budget && len(rep.Tasks) == 0 {
			t.Prompt, t.Run = "", nil
			n = taskSize(t)
		}
		if used+n > budget && len(rep.Tasks) > 0 {
			rep.Next = cursor(tasks[i-1])
			break
		}
		rep.Tasks = append(rep.Tasks, t)
		used += n + 1
	}
	return rep, nil
}

// cursor is where the page after t starts: its creation and its key.
func cursor(t protocol.BoardTask) string {
	return strconv.FormatInt(t.Created.UnixNano(), 10) + ":" + t.Key()
}

// parseCursor reads a list's After: nil for none.
func parseCursor(c string) (*protocol.BoardTask, error) {
	if c == "" {
		return nil, nil
	}
	bad := refuse(protocol.BoardErrInvalid, "after: %q is not the next of a page (pass the reply's next as it is)", clip(c))
	ns, key, ok := strings.Cut(c, ":")
	if !ok || len(c) > protocol.MaxBoardCursor {
		return nil, bad
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	plan, id, ok := strings.Cut(key, ".")
	if err != nil || !ok {
		return nil, bad
	}
	return &protocol.BoardTask{Plan: plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: id}, Created: time.Unix(0, n).UTC()}, nil
}

func taskSize(t protocol.BoardTask) int {
	b, _ := json.Marshal(t)
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
		return nil, noTask(key)
	}
	t = s.shown(t)
	return &protocol.BoardReply{Task: &t}, nil
}
