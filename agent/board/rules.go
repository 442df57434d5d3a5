package board

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// mayTake: the task's labels and assignee let agent a have it (whatever
// its status).
func mayTake(a protocol.BoardAgent, t protocol.BoardTask) bool {
	if t.Assignee != "" && t.Assignee != a.ID {
		return false
	}
	for _, l := range t.Labels {
		if !slices.Contains(a.Labels, l) {
			return false
		}
	}
	return true
}

// visible: what an agent may list and show: tasks it could take, holds (or
// held), or added. The operator sees every task. Every op answers an agent
// about a task it may not see as about one that does not exist (noTask).
func visible(a protocol.BoardAgent, t protocol.BoardTask) bool {
	return a.ID == protocol.OperatorUser || t.Holder == a.ID || t.CreatedBy == a.ID || mayTake(a, t)
}

// maxAttempts is how many claims a task allows before it fails.
func maxAttempts(t protocol.BoardTask) int {
	if t.BoardTaskSpec.Attempts > 0 {
		return t.BoardTaskSpec.Attempts
	}
	return protocol.DefaultBoardAttempts
}

// timeout is a task's lease (and a run task's timeout).
func timeout(t protocol.BoardTask) time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout)
	}
	return protocol.DefaultBoardTimeout
}

// needsDone: every task t needs is done (as this node's view has them), and
// made by the owner of its ID: a task an agent made under a plan's ID (from
// before agents' subtasks had a namespace) never counts as the plan's.
func (s *Service) needsDone(t protocol.BoardTask) bool {
	for _, n := range t.Needs {
		d, ok := s.st.get(protocol.BoardKey(t.Plan, n))
		if !ok || d.Status != protocol.BoardDone || !d.ByOwner() {
			return false
		}
	}
	return true
}

// waitingStatus is where a task that is not started stands: ready when
// everything it needs is done, blocked otherwise.
func (s *Service) waitingStatus(t protocol.BoardTask) string {
	if s.needsDone(t) {
		return protocol.BoardReady
	}
	return protocol.BoardBlocked
}

// blockedReason says what a blocked task waits for, and first what it may
// wait for in vain: a need that failed, was cancelled or is missing.
func (s *Service) blockedReason(t protocol.BoardTask) string {
	var stuck, waiting []string
	for _, n := range t.Needs {
		d, ok := s.st.get(protocol.BoardKey(t.Plan, n))
		switch {
		case !ok:
			stuck = append(stuck, fmt.Sprintf("needs %s, which does not exist", n))
		case !d.ByOwner():
			owner := protocol.BoardTaskOwner(n)
			if owner == protocol.OperatorUser {
				owner = "the operator"
			}
			stuck = append(stuck, fmt.Sprintf("needs %s, which %s created, not %s: it never counts as done", n, d.CreatedBy, owner))
		case d.Status == protocol.BoardFailed:
			stuck = append(stuck, fmt.Sprintf("needs %s, which failed", n))
		case d.Status == protocol.BoardCancelled:
			stuck = append(stuck, fmt.Sprintf("needs %s, which was cancelled", n))
		case d.Status != protocol.BoardDone:
			waiting = append(waiting, n)
		}
	}
	if len(stuck) > 0 {
		return strings.Join(stuck, "; ")
	}
	if len(waiting) > 0 {
		return "waits for " + strings.Join(waiting, ", ")
	}
	return "its needs are done: it becomes ready at the next sweep"
}

// shown is t as a reply carries it: a blocked task says what blocks it.
func (s *Service) shown(t protocol.BoardTask) protocol.BoardTask {
	if t.Status == protocol.BoardBlocked {
		t.Reason = s.blockedReason(t)
	}
	return t
}

// bounded clips a reason the board writes itself to the protocol's bound.
func bounded(reason string) string {
	if len(reason) <= protocol.MaxBoardReason {
		return reason
	}
	return reason[:protocol.MaxBoardReason-3] + "..."
}

// sameSpec: two specs state the same task (nil and empty lists alike).
func sameSpec(a, b protocol.BoardTaskSpec) bool {
	return a.ID == b.ID && a.Title == b.Title && slices.Equal(a.Run, b.Run) && a.Prompt == b.Prompt &&
		slices.Equal(a.Needs, b.Needs) && slices.Equal(a.Labels, b.Labels) && a.Assignee == b.Assignee &&
		a.Attempts == b.Attempts && a.Timeout == b.Timeout
}

// byAge orders tasks by creation, then by key.
func byAge(a, b protocol.BoardTask) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return strings.Compare(a.Key(), b.Key())
}
