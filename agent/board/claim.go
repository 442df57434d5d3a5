package board

import (
	"context"
	"errors"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

// claim gives the caller a task: the one it names, or the oldest ready task
// it may take (of the kind it asks for, of the plan when it names one). The
// caller's claims are counted and made one at a time on this node, so it
// never holds more than its claim limit through one node. (An agent asks
// the node it is connected to, the queue group's local member; claims it
// sent at once through two nodes could both pass the count before either
// node's view had the other's claim.)
func (s *Service) claim(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	if req.Task != "" && req.Plan == "" {
		return nil, refuse(protocol.BoardErrInvalid, "claim: a task is named by its plan and its ID: plan is required")
	}
	unlock := s.lockCaller(caller)
	defer unlock()
	a := s.agent(caller)
	held, err := s.holding(ctx, caller, a.ClaimLimit)
	if err != nil {
		return nil, err
	}
	if held >= a.ClaimLimit {
		return nil, refuse(protocol.BoardErrLimit, "%s holds %d task(s), its claim limit is %d: complete, fail or release one first", caller, held, a.ClaimLimit)
	}
	take := func(t protocol.BoardTask) (protocol.BoardTask, error) {
		switch {
		case !visible(a, t):
			return t, noTask(t.Key()) // neither its status nor whom it is for
		case t.Status != protocol.BoardReady:
			return t, refuse(protocol.BoardErrNotReady, "task %s is %s, not ready", t.Key(), t.Status)
		case !mayTake(a, t):
			return t, refuse(protocol.BoardErrForbidden, "task %s is not for %s (its assignee or labels)", t.Key(), caller)
		case req.Kind != "" && t.Kind() != req.Kind:
			return t, refuse(protocol.BoardErrForbidden, "task %s is a %s task, not %s", t.Key(), t.Kind(), req.Kind)
		}
		t.Status, t.Holder, t.Reason = protocol.BoardClaimed, caller, ""
		t.Attempts++
		now := s.now()
		t.ClaimedAt, t.RenewedAt = now, now
		t.LeaseUntil = s.leaseEnd(t, now)
		return t, nil
	}
	if req.Task != "" {
		t, err := s.change(ctx, protocol.BoardKey(req.Plan, req.Task), take)
		if err != nil {
			return nil, err
		}
		return s.claimed(t), nil
	}
	tried := map[string]bool{}
	for range maxClaimTries {
		key, ok := s.pick(func(key string, t *protocol.BoardTask) bool {
			return !tried[key] && (req.Plan == "" || t.Plan == req.Plan) && (req.Kind == "" || t.Kind() == req.Kind) && mayTake(a, *t)
		})
		if !ok {
			return nil, refuse(protocol.BoardErrNothing, "nothing ready for %s%s", caller, claimFilter(req))
		}
		tried[key] = true
		got, err := s.change(ctx, key, take)
		s.unpick(key)
		if err == nil {
			return s.claimed(got), nil
		}
		var be *protocol.BoardError
		if !errors.As(err, &be) || be.Code == protocol.BoardErrInternal {
			return nil, err
		}
		// Taken (or changed) under this claim: the next one.
	}
	return nil, refuse(protocol.BoardErrConflict, "%d ready tasks were taken under this claim: ask again", maxClaimTries)
}

// holding is how many tasks caller holds. The view says; at the limit, the
// bucket confirms (the view may not have seen a completion another node
// wrote a moment ago).
func (s *Service) holding(ctx context.Context, caller string, limit int) (int, error) {
	held := s.st.withStatus(protocol.BoardClaimed, func(t protocol.BoardTask) bool { return t.Holder == caller })
	if len(held) < limit {
		return len(held), nil
	}
	n := 0
	for _, t := range held {
		cur, ok, err := s.st.fetch(ctx, t.Key())
		if err != nil {
			return 0, err
		}
		if ok && cur.Status == protocol.BoardClaimed && cur.Holder == caller {
			n++
		}
	}
	return n, nil
}

// pick chooses the oldest ready task that keeps keep, one no other claim
// on this node is writing if there is one (concurrent claims would all
// choose the oldest, and all but one lose its compare-and-set), and marks
// it as being written until unpick. Claims on other nodes may still choose
// the same: compare-and-set decides.
func (s *Service) pick(keep func(key string, t *protocol.BoardTask) bool) (string, bool) {
	s.pickMu.Lock()
	defer s.pickMu.Unlock()
	t, ok := s.st.oldest(protocol.BoardReady, func(key string, t *protocol.BoardTask) bool { return s.picking[key] == 0 && keep(key, t) })
	if !ok {
		if t, ok = s.st.oldest(protocol.BoardReady, keep); !ok {
			return "", false
		}
	}
	s.picking[t.Key()]++
	return t.Key(), true
}

func (s *Service) unpick(key string) {
	s.pickMu.Lock()
	if s.picking[key]--; s.picking[key] <= 0 {
		delete(s.picking, key)
	}
	s.pickMu.Unlock()
}

func claimFilter(req protocol.BoardRequest) string {
	var f []string
	if req.Plan != "" {
		f = append(f, "in plan "+req.Plan)
	}
	if req.Kind != "" {
		f = append(f, "of kind "+req.Kind)
	}
	if len(f) == 0 {
		return ""
	}
	return " " + strings.Join(f, " ")
}

// claimed is the reply to a claim: the task, and the tasks it needs with
// their results (so the agent never reads another agent's files). The
// needs are given without their prompts and commands: what they left is
// what the claimed task works from. A need is the task its ID names, made
// by the owner of that ID: one an agent made under another's ID (a plan's,
// from before namespaces) is never given as it.
func (s *Service) claimed(t protocol.BoardTask) *protocol.BoardReply {
	rep := &protocol.BoardReply{Task: &t, Lease: protocol.Duration(s.lease())}
	for _, n := range t.Needs {
		d, ok := s.st.get(protocol.BoardKey(t.Plan, n))
		if !ok || !d.ByOwner() {
			continue
		}
		d.Prompt, d.Run = "", nil
		rep.Context = append(rep.Context, d)
	}
	return rep
}
