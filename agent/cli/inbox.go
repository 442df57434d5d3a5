package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// inboxCmd is `flock-agent inbox ack ID|FILE...`, run by the agent's work in
// its container: each message named (by message ID or file) is taken,
// moved to inbox/taken/ (worker.TakeMessage). The inbox is the one the
// agent gives its programs (FLOCK_INBOX_DIR), else the agent's directory's.
func inboxCmd(args []string, env Env, sio IO) int {
	if len(args) < 2 || args[0] != "ack" {
		fmt.Fprintln(sio.Err, "usage: flock-agent inbox ack ID|FILE...")
		return ExitUsage
	}
	dir := strings.TrimSpace(env("FLOCK_INBOX_DIR"))
	if dir == "" {
		id := strings.TrimSpace(env("FLOCK_AGENT_ID"))
		if id == "" {
			id = strings.TrimSpace(env(protocol.EnvAgentID))
		}
		shared := strings.TrimSpace(env("FLOCK_SHARED_DIR"))
		if shared == "" {
			shared = strings.TrimSpace(env(protocol.EnvSharedDir))
		}
		if shared == "" {
			shared = worker.DefaultSharedDir
		}
		if id == "" {
			fmt.Fprintln(sio.Err, "flock-agent inbox: FLOCK_INBOX_DIR or FLOCK_AGENT_ID: required (the agent sets them for its programs)")
			return ExitUsage
		}
		dir = filepath.Join(shared, "agents", id, "inbox")
	}
	code := ExitOK
	for _, ref := range args[1:] {
		file, err := worker.TakeMessage(dir, ref)
		if err != nil {
			fmt.Fprintf(sio.Err, "flock-agent inbox ack %s: %v\n", ref, err)
			if errors.Is(err, worker.ErrNotInInbox) {
				code = max(code, ExitTaskFailed)
			} else {
				code = max(code, ExitUsage)
			}
			continue
		}
		fmt.Fprintf(sio.Out, "taken %s: %s\n", ref, file)
	}
	return code
}
