//go:build !unix

package worker

import "context"

// The agent program needs process groups (unix) to be stopped whole.
func (a *Agent) superviseProgram(ctx context.Context) {
	a.log.Error("agent program: not supported on this system: not started")
}
