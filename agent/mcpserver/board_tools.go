package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// What both servers' board tools share: the task as the tools return it,
// list and show. A refusal of the board service is a tool error with its
// message and code ("board: ... (not-holder)").

// boardWait bounds one request to the board.
const boardWait = 15 * time.Second

// BoardTaskOut is a board task as the tools return it.
type BoardTaskOut struct {
	Plan           string                `json:"plan"`
	ID             string                `json:"id"`
	Title          string                `json:"title,omitempty"`
	Kind           string                `json:"kind"` // run or prompt
	Run            []string              `json:"run,omitempty"`
	Prompt         string                `json:"prompt,omitempty"`
	Needs          []string              `json:"needs,omitempty"`
	Labels         []string              `json:"labels,omitempty"`
	Assignee       string                `json:"assignee,omitempty"`
	Status         string                `json:"status"`
	Holder         string                `json:"holder,omitempty"`
	LeaseUntil     *time.Time            `json:"lease_until,omitempty"`
	AttemptsUsed   int                   `json:"attempts_used"`
	Attempts       int                   `json:"attempts"`        // claims before it fails
	TimeoutSeconds float64               `json:"timeout_seconds"` // how long a claim may last, renewed or not (a run task's timeout)
	Result         *protocol.BoardResult `json:"result,omitempty"`
	Reason         string                `json:"reason,omitempty"`
	Parent         string                `json:"parent,omitempty"`
	CreatedBy      string                `json:"created_by,omitempty"`
	Created        time.Time             `json:"created"`
	Updated        time.Time             `json:"updated"`
}

func taskOut(t protocol.BoardTask) BoardTaskOut {
	out := BoardTaskOut{
		Plan: t.Plan, ID: t.ID, Title: t.Title, Kind: t.Kind(), Run: t.Run, Prompt: t.Prompt, Needs: t.Needs, Labels: t.Labels,
		Assignee: t.Assignee, Status: t.Status, Holder: t.Holder, AttemptsUsed: t.Attempts, Attempts: t.BoardTaskSpec.Attempts,
		TimeoutSeconds: time.Duration(t.Timeout).Seconds(), Result: t.Result, Reason: t.Reason, Parent: t.Parent,
		CreatedBy: t.CreatedBy, Created: t.Created, Updated: t.Updated,
	}
	if out.Attempts == 0 {
		out.Attempts = protocol.DefaultBoardAttempts
	}
	if out.TimeoutSeconds == 0 {
		out.TimeoutSeconds = protocol.DefaultBoardTimeout.Seconds()
	}
	if !t.LeaseUntil.IsZero() {
		l := t.LeaseUntil
		out.LeaseUntil = &l
	}
	return out
}

func tasksOut(ts []protocol.BoardTask) []BoardTaskOut {
	out := make([]BoardTaskOut, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOut(t))
	}
	return out
}

// taskTool makes a tool of a board request that answers with one task: the
// request is bounded by boardWait, and the task returned as the tools show it.
func taskTool[In any](req func(context.Context, In) (*protocol.BoardTask, error)) mcp.ToolHandlerFor[In, BoardTaskOut] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, BoardTaskOut, error) {
		ctx, cancel := context.WithTimeout(ctx, boardWait)
		defer cancel()
		t, err := req(ctx, in)
		if err != nil {
			return nil, BoardTaskOut{}, err
		}
		return nil, taskOut(*t), nil
	}
}

// BoardListIn is the board_list tool's input.
type BoardListIn struct {
	Plan   string   `json:"plan,omitempty" jsonschema:"only this plan's tasks"`
	Status []string `json:"status,omitempty" jsonschema:"only tasks of these statuses: blocked, ready, claimed, done, failed, cancelled"`
}

// BoardListOut is the board_list tool's output.
type BoardListOut struct {
	Tasks []BoardTaskOut `json:"tasks"`
}

// BoardTaskIn names one task.
type BoardTaskIn struct {
	Plan string `json:"plan" jsonschema:"the task's plan"`
	Task string `json:"task" jsonschema:"the task's ID in its plan (an agent's subtask: <agent>/<id>)"`
}

type boardTools struct{ bc *board.Client }

func (b boardTools) list(ctx context.Context, _ *mcp.CallToolRequest, in BoardListIn) (*mcp.CallToolResult, BoardListOut, error) {
	for _, s := range in.Status {
		switch s {
		case protocol.BoardBlocked, protocol.BoardReady, protocol.BoardClaimed, protocol.BoardDone, protocol.BoardFailed, protocol.BoardCancelled:
		default:
			return nil, BoardListOut{}, fmt.Errorf("status: %q is not a status (blocked, ready, claimed, done, failed, cancelled)", s)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	ts, err := b.bc.List(ctx, in.Plan, in.Status...)
	if err != nil {
		return nil, BoardListOut{}, err
	}
	return nil, BoardListOut{Tasks: tasksOut(ts)}, nil
}

func (b boardTools) show(ctx context.Context, in BoardTaskIn) (*protocol.BoardTask, error) {
	return b.bc.Show(ctx, in.Plan, in.Task)
}

// BoardSpecIn is a task as a tool states it (a plan's for board_apply, a
// subtask for board_add): exactly one of run and prompt.
type BoardSpecIn struct {
	ID             string   `json:"id" jsonschema:"the task's ID in its plan: letters, digits, '_' and '-' (a subtask's becomes <agent>/<id>, in the adding agent's namespace)"`
	Title          string   `json:"title,omitempty" jsonschema:"a short title"`
	Run            []string `json:"run,omitempty" jsonschema:"a run task: the program and its arguments (no shell)"`
	Prompt         string   `json:"prompt,omitempty" jsonschema:"a prompt task: the text for an AI agent"`
	Needs          []string `json:"needs,omitempty" jsonschema:"IDs of the plan's tasks that must be done first (a subtask may need an agent's subtask, <agent>/<id>)"`
	Labels         []string `json:"labels,omitempty" jsonschema:"labels an agent must all have to claim it"`
	Assignee       string   `json:"assignee,omitempty" jsonschema:"only this agent may claim it"`
	Attempts       int      `json:"attempts,omitempty" jsonschema:"claims before it fails (default 3)"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"how long a claim of it may last, renewed or not (a run task's timeout), in seconds (default 600)"`
}

func (s BoardSpecIn) spec() protocol.BoardTaskSpec {
	return protocol.BoardTaskSpec{
		ID: s.ID, Title: s.Title, Run: s.Run, Prompt: s.Prompt, Needs: s.Needs, Labels: s.Labels, Assignee: s.Assignee,
		Attempts: s.Attempts, Timeout: protocol.Duration(time.Duration(s.TimeoutSeconds * float64(time.Second))),
	}
}
