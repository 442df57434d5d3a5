package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// ErrNoAnswer is an agent that did not answer a logs request in time: not
// running, not connected, or not of the flock.
var ErrNoAnswer = errors.New("no answer")

// Logs asks agent id for its last lines log lines (all it keeps when 0).
// The agent answers on its own subject, which only it may serve; the
// answer is bounded (protocol.LogsMaxBytes).
func (c *Client) Logs(ctx context.Context, id string, lines int) (protocol.LogsReply, error) {
	var out protocol.LogsReply
	if _, err := protocol.ParseAgentID(id); err != nil {
		return out, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
	}
	body, _ := json.Marshal(protocol.LogsRequest{Lines: lines})
	m, err := c.nc.RequestWithContext(ctx, protocol.LogsSubject(id), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return out, fmt.Errorf("%s: %w (not running, or not an agent of this flock)", id, ErrNoAnswer)
	case err != nil:
		return out, fmt.Errorf("%s: %w", id, err)
	}
	if err := json.Unmarshal(m.Data, &out); err != nil {
		return out, fmt.Errorf("%s: unreadable answer: %w", id, err)
	}
	if out.Agent != id {
		return out, fmt.Errorf("%s: answer names %q", id, out.Agent)
	}
	return out, nil
}
