package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// The agent's board tools: as that agent (its own request subjects, which
// the bus lets only it publish on), never more than the board lets it do.

func addBoardAgentTools(s *mcp.Server, bc *board.Client) {
	b := boardTools{bc: bc}
	mcp.AddTool(s, &mcp.Tool{Name: "board_list", Description: "The board's tasks this agent may see (of a plan, of some statuses)."}, b.list)
	mcp.AddTool(s, &mcp.Tool{Name: "board_claim", Description: "Take a ready task from the board (of a plan, a task, a kind), under a lease: returns it and the results of the tasks it needs. claimed is false when nothing is ready for this agent."}, b.claim)
	mcp.AddTool(s, &mcp.Tool{Name: "board_renew", Description: "Extend the lease on a task this agent holds (it lasts the board's lease, 30 s by default, unrenewed). The agent's runtime renews every claim of this agent while its program runs, so a program the runtime started need not call it."}, taskTool(b.renew))
	mcp.AddTool(s, &mcp.Tool{Name: "board_complete", Description: "Mark a task this agent holds done, with a summary (the tasks that need it read it) and references to what it produced."}, taskTool(b.complete))
	mcp.AddTool(s, &mcp.Tool{Name: "board_fail", Description: "Mark a task this agent holds failed, saying why."}, taskTool(b.fail))
	mcp.AddTool(s, &mcp.Tool{Name: "board_release", Description: "Hand a task this agent holds back to the board for another claim."}, taskTool(b.release))
	mcp.AddTool(s, &mcp.Tool{Name: "board_add", Description: "Add a subtask (a run or a prompt task) to the plan, under a task this agent holds. Its ID is this agent's: id x becomes <agent>/x (no agent takes an ID of the operator's plan or of another agent); the reply has it."}, taskTool(b.add))
	addBoardArtifactPut(s, b)
	addBoardArtifactGet(s, b)
}

// BoardClaimIn is the board_claim tool's input.
type BoardClaimIn struct {
	Plan string `json:"plan,omitempty" jsonschema:"only a task of this plan"`
	Task string `json:"task,omitempty" jsonschema:"this task of the plan"`
	Kind string `json:"kind,omitempty" jsonschema:"only a task of this kind: run or prompt (default: either)"`
}

// BoardClaimOut is the board_claim tool's output.
type BoardClaimOut struct {
	Claimed bool          `json:"claimed"`
	Task    *BoardTaskOut `json:"task,omitempty"`
	// Context is the tasks the claimed one needs, with their results.
	Context []BoardTaskOut `json:"context"`
	Note    string         `json:"note,omitempty"` // not claimed: why
}

func (b boardTools) claim(ctx context.Context, _ *mcp.CallToolRequest, in BoardClaimIn) (*mcp.CallToolResult, BoardClaimOut, error) {
	out := BoardClaimOut{Context: []BoardTaskOut{}}
	if in.Kind != "" && in.Kind != protocol.BoardKindRun && in.Kind != protocol.BoardKindPrompt {
		return nil, out, fmt.Errorf("kind: run or prompt (got %q)", in.Kind)
	}
	ctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	rep, err := b.bc.Claim(ctx, in.Plan, in.Task, in.Kind)
	var be *protocol.BoardError
	if errors.As(err, &be) && be.Code == protocol.BoardErrNothing {
		out.Note = be.Msg
		return nil, out, nil // nothing ready: an answer, not a failure
	}
	if err != nil {
		return nil, out, err
	}
	if rep.Task == nil {
		return nil, out, errors.New("board: a claim's reply without its task")
	}
	t := taskOut(*rep.Task)
	out.Claimed, out.Task, out.Context = true, &t, tasksOut(rep.Context)
	return nil, out, nil
}

func (b boardTools) renew(ctx context.Context, in BoardTaskIn) (*protocol.BoardTask, error) {
	return b.bc.Renew(ctx, in.Plan, in.Task)
}

// BoardCompleteIn is the board_complete tool's input.
type BoardCompleteIn struct {
	Plan      string   `json:"plan" jsonschema:"the task's plan"`
	Task      string   `json:"task" jsonschema:"the task's ID"`
	Summary   string   `json:"summary" jsonschema:"what was done: the tasks that need this one read it"`
	Artifacts []string `json:"artifacts,omitempty" jsonschema:"references to what it produced (names in the board's artifact store)"`
}

func (b boardTools) complete(ctx context.Context, in BoardCompleteIn) (*protocol.BoardTask, error) {
	return b.bc.Complete(ctx, in.Plan, in.Task, protocol.BoardResult{Summary: in.Summary, Artifacts: in.Artifacts})
}

// BoardFailIn is the board_fail tool's input.
type BoardFailIn struct {
	Plan   string `json:"plan" jsonschema:"the task's plan"`
	Task   string `json:"task" jsonschema:"the task's ID"`
	Reason string `json:"reason" jsonschema:"why it failed"`
}

func (b boardTools) fail(ctx context.Context, in BoardFailIn) (*protocol.BoardTask, error) {
	return b.bc.Fail(ctx, in.Plan, in.Task, in.Reason, nil)
}

// BoardReleaseIn is the board_release tool's input.
type BoardReleaseIn struct {
	Plan   string `json:"plan" jsonschema:"the task's plan"`
	Task   string `json:"task" jsonschema:"the task's ID"`
	Reason string `json:"reason,omitempty" jsonschema:"why it is handed back"`
}

func (b boardTools) release(ctx context.Context, in BoardReleaseIn) (*protocol.BoardTask, error) {
	return b.bc.Release(ctx, in.Plan, in.Task, in.Reason)
}

// BoardAddIn is the board_add tool's input.
type BoardAddIn struct {
	Plan  string `json:"plan" jsonschema:"the plan of the task this agent holds"`
	Under string `json:"under" jsonschema:"the ID of the task this agent holds, the subtask's parent"`
	BoardSpecIn
}

func (b boardTools) add(ctx context.Context, in BoardAddIn) (*protocol.BoardTask, error) {
	return b.bc.Add(ctx, in.Plan, in.Under, in.spec())
}
