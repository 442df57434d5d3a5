package mcpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/protocol"
)

// The board's artifacts as tools: an agent puts text under a task it holds
// and gets what the tasks it needs left; the operator gets any.

// BoardPutIn is the board_put_artifact tool's input.
type BoardPutIn struct {
	Plan string `json:"plan" jsonschema:"the task's plan"`
	Task string `json:"task" jsonschema:"a task this agent holds"`
	Name string `json:"name" jsonschema:"the artifact's name: letters, digits, '.', '_', '-' (slashes between parts)"`
	Text string `json:"text" jsonschema:"its content (at most 256 KiB)"`
}

// BoardArtifactIn names an artifact.
type BoardArtifactIn struct {
	Plan string `json:"plan" jsonschema:"the task's plan"`
	Task string `json:"task" jsonschema:"the task that left it"`
	Name string `json:"name" jsonschema:"the artifact's name (the task's result lists them)"`
}

// BoardArtifactOut is an artifact and, for a get, its content: Text when it
// is UTF-8, else Base64.
type BoardArtifactOut struct {
	Artifact protocol.BoardArtifact `json:"artifact"`
	Text     string                 `json:"text,omitempty"`
	Base64   string                 `json:"base64,omitempty"`
}

func addBoardArtifactPut(s *mcp.Server, b boardTools) {
	mcp.AddTool(s, &mcp.Tool{Name: "board_put_artifact", Description: "Store text as an artifact of a task this agent holds (name it in board_complete's artifacts): the tasks that need this one get it with board_get_artifact."}, b.putArtifact)
}

func addBoardArtifactGet(s *mcp.Server, b boardTools) {
	mcp.AddTool(s, &mcp.Tool{Name: "board_get_artifact", Description: "An artifact a task left: one this agent put, or of a task that a task it holds needs (the operator: any)."}, b.getArtifact)
}

func (b boardTools) putArtifact(ctx context.Context, _ *mcp.CallToolRequest, in BoardPutIn) (*mcp.CallToolResult, BoardArtifactOut, error) {
	if len(in.Text) > protocol.ArtifactBytes {
		return nil, BoardArtifactOut{}, fmt.Errorf("text: %d bytes, over the board's %d-byte limit of one artifact", len(in.Text), protocol.ArtifactBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	a, err := b.bc.Put(ctx, in.Plan, in.Task, in.Name, []byte(in.Text))
	if err != nil {
		return nil, BoardArtifactOut{}, err
	}
	return nil, BoardArtifactOut{Artifact: *a}, nil
}

func (b boardTools) getArtifact(ctx context.Context, _ *mcp.CallToolRequest, in BoardArtifactIn) (*mcp.CallToolResult, BoardArtifactOut, error) {
	ctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	data, a, err := b.bc.Get(ctx, in.Plan, in.Task, in.Name)
	if err != nil {
		return nil, BoardArtifactOut{}, err
	}
	out := BoardArtifactOut{Artifact: *a}
	if utf8.Valid(data) {
		out.Text = string(data)
	} else {
		out.Base64 = base64.StdEncoding.EncodeToString(data)
	}
	return nil, out, nil
}
