package worker

// How a board task ends on this agent: failed, released or finished with
// the board, and the texts its report carries.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// failReason says why a run failed.
func failReason(res *protocol.Result) string {
	switch {
	case res.Status == protocol.StatusTimeout:
		return "timeout: " + res.Error
	case res.ExitCode != nil:
		return fmt.Sprintf("exit code %d", *res.ExitCode)
	case res.Error != "":
		return res.Error
	}
	return res.Status
}

// failBoard fails a held task on the board.
func (a *Agent) failBoard(cl *board.Client, t *protocol.BoardTask, reason string, res *protocol.BoardResult, log *slog.Logger) {
	reason = board.Text(reason, protocol.MaxBoardReason, false)
	if err := a.finishBoard(func(ctx context.Context) error {
		_, err := cl.Fail(ctx, t.Plan, t.ID, reason, res)
		return err
	}); err != nil {
		log.Error("board: not failed: the task runs again once its lease is over", "reason", reason, "err", err)
	}
	a.event(protocol.EventBoardFailed, t.Key(), reason)
}

// releaseBoard hands a held task back to the board: once, at once (the
// agent is stopping).
func (a *Agent) releaseBoard(cl *board.Client, t *protocol.BoardTask, why string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := cl.Release(ctx, t.Plan, t.ID, why); err != nil {
		log.Warn("board: not released: another agent takes it once its lease is over", "err", err)
		a.event(protocol.EventBoardReleased, t.Key(), why+"; the release did not reach the board: "+err.Error())
		return
	}
	a.event(protocol.EventBoardReleased, t.Key(), why)
}

// finishBoard sends a complete or a fail, asking again for a while when the
// board service does not answer or asks to (a conflict): the work is done,
// and only its lease's end would otherwise tell the board. A refusal is
// final. While the agent hands tasks back there is no time to ask twice.
func (a *Agent) finishBoard(do func(context.Context) error) error {
	deadline := time.Now().Add(boardFinishFor)
	backoff := 250 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), boardRequestTimeout)
		err := do(ctx)
		cancel()
		var be *protocol.BoardError
		if err == nil || errors.As(err, &be) && !protocol.BoardRetryable(be.Code) {
			return err
		}
		if a.handback.Load() || time.Now().Add(backoff).After(deadline) {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// tailText is the end of b as the board takes a summary: at most n bytes,
// starting on a whole character, valid UTF-8, no NUL byte.
func tailText(b []byte, n int) string {
	for k := 0; k < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); k++ {
		b = b[1:]
	}
	return board.Text(string(b), n, true)
}

// clip is s cut to at most n bytes, on a whole character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
