package protocol

import "regexp"

// A board task's ID says who alone may create it: a plan's (BoardIDRule)
// the operator, an agent's subtask "<agent>/<id>" that agent (see the
// board's contract in board.go).

// BoardTaskRefRule is the rule for a task named in a request or a need: a
// plan's task (BoardIDRule), or an agent's subtask "<agent>/<id>" (the
// agent's ID by AgentIDRule, then BoardIDRule's).
const BoardTaskRefRule = `^([a-z][a-z0-9-]{0,30}/)?[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`

var boardTaskRefPattern = regexp.MustCompile(BoardTaskRefRule)

// ValidBoardTaskRef reports whether s may name a task: a plan's or an
// agent's.
func ValidBoardTaskRef(s string) bool { return boardTaskRefPattern.MatchString(s) }

// BoardAgentTaskID is the ID of the subtask agent adds as id: in the agent's
// own namespace.
func BoardAgentTaskID(agent, id string) string { return agent + "/" + id }

// BoardTaskOwner is who alone may create the task of this ID: the agent of
// "<agent>/<id>", else the operator (a plan's task).
func BoardTaskOwner(id string) string {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return id[:i]
		}
	}
	return OperatorUser
}

// BoardTaskFile is a task's ID as one file or object name: "<agent>/<id>"
// as "<agent>.<id>" (no ID has a dot, so it names no other task); a plan's
// task's ID as it is.
func BoardTaskFile(id string) string {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return id[:i] + "." + id[i+1:]
		}
	}
	return id
}

// BoardKeyFile is a task's key as one file name: "<plan>.<BoardTaskFile>".
func BoardKeyFile(plan, task string) string { return plan + "." + BoardTaskFile(task) }

// ByOwner reports whether the task was created by the owner of its ID
// (BoardTaskOwner). One that was not (a subtask an agent added under a
// plan's ID before agents' subtasks had a namespace) is never taken for the
// plan's task: it satisfies no need, and neither its result nor its
// artifacts reach a task that needs its ID.
func (t BoardTask) ByOwner() bool { return t.CreatedBy == BoardTaskOwner(t.ID) }
