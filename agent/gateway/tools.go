package gateway

// What of a metered request's body the gateway refuses, or prices beyond
// its tokens: the server-side tools, input stored upstream, choices.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// billedTools are the server-side tools an upstream bills per use, beyond
// tokens, by the prefix of their type: refused, since no budget counts them.
var billedToolTypes = []string{"web_search", "code_execution", "code_interpreter", "file_search", "image_generation"}

// connectingToolTypes are the server-side tools with which the upstream
// connects to a server the request names (a URL to fetch, an MCP server):
// a way out of the flock for whatever the agent puts in the request, and a
// way in for what the server answers. Refused, whatever their price.
var connectingToolTypes = []string{"web_fetch", "mcp"}

// storedInputFields are request fields that make the upstream read input
// it stores (an earlier response, a conversation, a saved prompt), which
// the gateway cannot see and so cannot bound.
var storedInputFields = []string{"previous_response_id", "conversation", "prompt"}

// maxChoices is the most choices (n) of one Chat Completions call, as the
// API allows.
const maxChoices = 128

// connecting names the first server-side tool (or MCP connector) of the
// request with which the upstream would connect to a server it names ("").
func connecting(req map[string]json.RawMessage) string {
	if v, ok := req["mcp_servers"]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return "mcp_servers (the MCP connector)"
	}
	var tools []struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(req["tools"], &tools)
	for _, t := range tools {
		for _, c := range connectingToolTypes {
			if strings.HasPrefix(t.Type, c) {
				return fmt.Sprintf("tool %q", t.Type)
			}
		}
	}
	return ""
}

// billedTools adds up the operator's prices of the per-use billed tools the
// request offers, or names the first one it has not priced.
func billedTools(req map[string]json.RawMessage, prices map[string]int64) (price int64, refused string) {
	var types []string
	if _, ok := req["web_search_options"]; ok { // Chat Completions' search models
		types = append(types, "web_search_options")
	}
	var tools []struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(req["tools"], &tools)
	for _, t := range tools {
		types = append(types, t.Type)
	}
	for _, t := range types {
		b := billedPrefix(t)
		if b == "" {
			continue
		}
		p, ok := prices["tool:"+b]
		if !ok {
			return 0, t
		}
		price += p
	}
	return price, ""
}

// billedPrefix is the billed tool family a tool type belongs to ("").
func billedPrefix(toolType string) string {
	for _, b := range billedToolTypes {
		if strings.HasPrefix(toolType, b) {
			return b
		}
	}
	return ""
}
