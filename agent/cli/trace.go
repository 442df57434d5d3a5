package cli

import (
	"context"
	"fmt"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// traced puts the caller's trace in ctx: a CLI that is itself traced
// (TRACEPARENT, as a task's process has it) sends its tasks in that trace;
// a malformed one is a warning, and the task starts a trace of its own.
func traced(ctx context.Context, env Env, sio IO) context.Context {
	v := env(protocol.EnvTraceparent)
	if v == "" {
		return ctx
	}
	tp, err := protocol.ParseTraceparent(v)
	if err != nil {
		fmt.Fprintf(sio.Err, "flock-agent: warning: %s ignored: %v\n", protocol.EnvTraceparent, err)
		return ctx
	}
	return operator.WithTrace(ctx, tp)
}
