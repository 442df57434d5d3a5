package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCall is an agent program using its agent's MCP server, as an AI agent
// would: the server runs as a child with the task's environment.
func mcpCall(tool, args string) {
	var in map[string]any
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		fail(fmt.Errorf("arguments: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command("/flock-agent", "mcp")
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fail(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: in})
	if err != nil {
		fail(err)
	}
	if res.IsError {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				fmt.Println("FAIL", tc.Text)
			}
		}
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res.StructuredContent)
}
