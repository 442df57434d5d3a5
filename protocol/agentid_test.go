package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAgentID(t *testing.T) {
	for _, ok := range []string{"a", "agent-1", "a" + strings.Repeat("b", 30), "x-9-"} {
		if id, err := ParseAgentID(ok); err != nil || string(id) != ok || !ValidAgentID(ok) {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Agent-1", "1agent", "agent_1", "a" + strings.Repeat("b", 31), "agent.1", "agent 1", "../x"} {
		_, err := ParseAgentID(bad)
		var e *AgentIDError
		if !errors.As(err, &e) || e.ID != bad || ValidAgentID(bad) || !strings.Contains(err.Error(), AgentIDRule) {
			t.Errorf("%q: got %v, want an AgentIDError naming the rule", bad, err)
		}
	}
}
