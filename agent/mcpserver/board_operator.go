package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// The operator's board tools: write a plan, read the tasks, cancel and
// retry. Claiming and completing are the agents'.

func addBoardOperatorTools(s *mcp.Server, bc *board.Client) {
	b := boardTools{bc: bc}
	mcp.AddTool(s, &mcp.Tool{Name: "board_apply", Description: "Write a plan (its ID and its tasks, with their dependencies) to the board. Tasks new to the plan are created, changed ones updated (unless an agent holds or finished them: kept), ones no longer in it cancelled; returns what happened to each. A bad plan is refused whole, every problem named, and so is one with a task on the board that an agent created (never adopted). dry_run: what it would do (refused says so), writing nothing."}, b.apply)
	mcp.AddTool(s, &mcp.Tool{Name: "board_list", Description: "The board's tasks (of a plan, of some statuses) with their status, holder and attempts."}, b.list)
	mcp.AddTool(s, &mcp.Tool{Name: "board_show", Description: "One task of the board, everything about it, its result too."}, taskTool(b.show))
	mcp.AddTool(s, &mcp.Tool{Name: "board_cancel", Description: "Cancel a task that is not done (its holder's lease ends)."}, taskTool(b.cancel))
	mcp.AddTool(s, &mcp.Tool{Name: "board_retry", Description: "Put a failed or cancelled task back on the board, its attempts reset."}, taskTool(b.retry))
	addBoardArtifactGet(s, b)
	mcp.AddTool(s, &mcp.Tool{Name: "board_remove_plan", Description: "Delete every task of a finished plan (all done, failed or cancelled) from the board, freeing its room; refused while a task of it is open."}, b.removePlan)
}

// BoardPlanIn names a plan.
type BoardPlanIn struct {
	Plan string `json:"plan" jsonschema:"the plan's ID"`
}

// BoardRemoveOut is the board_remove_plan tool's output: the tasks deleted.
type BoardRemoveOut struct {
	Plan    string                 `json:"plan"`
	Changes []protocol.BoardChange `json:"changes"`
}

func (b boardTools) removePlan(ctx context.Context, _ *mcp.CallToolRequest, in BoardPlanIn) (*mcp.CallToolResult, BoardRemoveOut, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*boardWait)
	defer cancel()
	changes, err := b.bc.Remove(ctx, in.Plan)
	if err != nil {
		return nil, BoardRemoveOut{}, err
	}
	if changes == nil {
		changes = []protocol.BoardChange{}
	}
	return nil, BoardRemoveOut{Plan: in.Plan, Changes: changes}, nil
}

// BoardApplyIn is the board_apply tool's input: a plan.
type BoardApplyIn struct {
	Plan   string        `json:"plan" jsonschema:"the plan's ID: letters, digits, '_' and '-'; applying the same ID again edits that plan"`
	Tasks  []BoardSpecIn `json:"tasks" jsonschema:"every task of the plan"`
	DryRun bool          `json:"dry_run,omitempty" jsonschema:"say what applying it would do (the board's checks too), writing nothing"`
}

// BoardApplyOut is the board_apply tool's output.
type BoardApplyOut struct {
	Plan    string                 `json:"plan"`
	DryRun  bool                   `json:"dry_run,omitempty"`
	Changes []protocol.BoardChange `json:"changes"`
	Counts  map[string]int         `json:"counts"` // changes by kind: created, updated, unchanged, kept, cancelled, refused
	// Refused is, for a dry run, why the board would refuse the apply
	// (its message and code); the changes say which tasks.
	Refused string `json:"refused,omitempty"`
}

func (b boardTools) apply(ctx context.Context, _ *mcp.CallToolRequest, in BoardApplyIn) (*mcp.CallToolResult, BoardApplyOut, error) {
	p := protocol.BoardPlan{Plan: in.Plan, Tasks: make([]protocol.BoardTaskSpec, 0, len(in.Tasks))}
	for _, t := range in.Tasks {
		p.Tasks = append(p.Tasks, t.spec())
	}
	ctx, cancel := context.WithTimeout(ctx, 4*boardWait)
	defer cancel()
	out := BoardApplyOut{Plan: in.Plan, DryRun: in.DryRun, Counts: map[string]int{}}
	var changes []protocol.BoardChange
	var err error
	if in.DryRun {
		changes, err = b.bc.DryRun(ctx, p)
		var be *protocol.BoardError
		if errors.As(err, &be) && changes != nil {
			out.Refused, err = be.Error(), nil // the answer: what it would do, and that it would be refused
		}
	} else {
		changes, err = b.bc.Apply(ctx, p)
	}
	if err != nil {
		return nil, BoardApplyOut{}, err
	}
	out.Changes = changes
	if out.Changes == nil {
		out.Changes = []protocol.BoardChange{}
	}
	for _, c := range changes {
		out.Counts[c.Change]++
	}
	return nil, out, nil
}

// BoardCancelIn is the board_cancel tool's input.
type BoardCancelIn struct {
	Plan   string `json:"plan" jsonschema:"the task's plan"`
	Task   string `json:"task" jsonschema:"the task's ID"`
	Reason string `json:"reason,omitempty" jsonschema:"why (kept on the task)"`
}

func (b boardTools) cancel(ctx context.Context, in BoardCancelIn) (*protocol.BoardTask, error) {
	return b.bc.Cancel(ctx, in.Plan, in.Task, in.Reason)
}

func (b boardTools) retry(ctx context.Context, in BoardTaskIn) (*protocol.BoardTask, error) {
	return b.bc.Retry(ctx, in.Plan, in.Task)
}
