package protocol

import (
	"fmt"
	"regexp"
)

// AgentIDRule is the one rule for an agent's ID, wherever one is read: the
// stack's config, the agent's environment, the ledger's keys, a message's
// recipient, a container's label. An ID names subjects (tasks.<id>), a bus
// user, a consumer, a stream, a directory and container and network names:
// lower case, a letter first, at most 31 characters.
const AgentIDRule = `^[a-z][a-z0-9-]{0,30}$`

var agentIDPattern = regexp.MustCompile(AgentIDRule)

// AgentID is an agent's ID that has kept the rule.
type AgentID string

// ParseAgentID returns s as an AgentID, or the one error every part of the
// flock gives for an ID that breaks the rule.
func ParseAgentID(s string) (AgentID, error) {
	if !agentIDPattern.MatchString(s) {
		return "", &AgentIDError{ID: s}
	}
	return AgentID(s), nil
}

// ValidAgentID reports whether s keeps the rule.
func ValidAgentID(s string) bool { return agentIDPattern.MatchString(s) }

// AgentIDError is an ID that breaks the rule.
type AgentIDError struct{ ID string }

func (e *AgentIDError) Error() string {
	return fmt.Sprintf("%q is not an agent ID: it must match %s (a lower-case letter, then up to 30 lower-case letters, digits or '-')", e.ID, AgentIDRule)
}
