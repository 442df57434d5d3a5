package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// The board (the flock's shared task list) has prompt tasks for AI agents.
// Beside its inbox, `ai-agent run` works them: it claims one as its agent
// (its own connection to the bus, with the agent's key, as `flock-agent
// mcp` makes one), asks the model with the prompt and the results of the
// tasks it needs, writes the answer to board/<plan>.<task>/answer.md in the
// agent's directory (an agent's subtask <agent>/<id> as <agent>.<id>) and completes the task with the answer's beginning as
// its summary and the file as its artifact; a model error fails it. It
// renews the claim's lease while the model is slow, claims again at once
// after a task, and otherwise when the board rings (board.ready) or every
// boardPoll. On SIGTERM the task in hand is released, for another agent.

const (
	boardPoll    = 5 * time.Second
	boardAsk     = 5 * time.Second        // one request to the board
	boardQuiet   = 250 * time.Millisecond // least time between two claims that found nothing
	boardMaxWait = 5 * time.Minute        // the longest wait after claims that failed
	answerFile   = "answer.md"
)

var errLeaseLost = errors.New("the board no longer gives this agent the task")

// workBoard claims and answers the board's prompt tasks until ctx ends.
func (a *agent) workBoard(ctx context.Context) {
	cl, nc, err := board.ConnectAgent(a.getenv, "ai-agent", nats.RetryOnFailedConnect(true))
	if err != nil {
		a.log.Error("board: cannot reach the bus as the agent: not working the board", "err", err)
		return
	}
	defer nc.Close()
	ring := make(chan struct{}, 1)
	if _, err := nc.Subscribe(protocol.SubjectBoardReady, func(*nats.Msg) {
		select {
		case ring <- struct{}{}:
		default:
		}
	}); err != nil {
		a.log.Warn("board: no ready signal: asking every few seconds only", "err", err)
	}
	a.log.Info("board: working its prompt tasks", "agent", cl.As())
	var (
		lastEmpty time.Time
		lastErr   string
		wait      time.Duration
	)
	for ctx.Err() == nil {
		if quiet := boardQuiet - time.Since(lastEmpty); quiet > 0 && !pace.Sleep(ctx, quiet) {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, boardAsk)
		rep, err := cl.Claim(cctx, "", "", protocol.BoardKindPrompt)
		cancel()
		var be *protocol.BoardError
		switch {
		case err == nil && rep.Task != nil:
			lastErr, wait = "", 0
			a.boardTask(ctx, cl, rep)
			continue // at once: there may be more
		case ctx.Err() != nil:
			return
		case err == nil, errors.As(err, &be) && (be.Code == protocol.BoardErrNothing || be.Code == protocol.BoardErrLimit), errors.Is(err, nats.ErrNoResponders):
			// Nothing for it; or the agent holds its claim limit (the
			// runtime runs a run task as this agent); or no board
			// service yet: normal.
			wait = boardPoll
		default:
			wait = min(max(2*wait, 2*boardPoll), boardMaxWait)
			if err.Error() != lastErr {
				lastErr = err.Error()
				a.log.Warn("board: claim failed: asking again later", "err", err, "in", wait.String())
			}
		}
		lastEmpty = time.Now()
		t := time.NewTimer(wait - wait/5 + rand.N(2*wait/5+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-ring:
		case <-t.C:
		}
		t.Stop()
	}
}

// boardTask answers one claimed prompt task and tells the board.
func (a *agent) boardTask(ctx context.Context, cl *board.Client, rep *protocol.BoardReply) {
	t := rep.Task
	key := t.Key()
	log := a.log.With("board", key, "attempt", t.Attempts)
	if strings.TrimSpace(t.Prompt) == "" {
		a.boardFail(cl, t, "not a prompt task: this agent answers prompts only", log)
		return
	}
	timeout := time.Duration(t.Timeout)
	if timeout <= 0 {
		timeout = protocol.DefaultBoardTimeout
	}

	// Renewed every third of the board's lease (the runtime renews it too,
	// while this program runs: two voices, one lost renewal harmless).
	lease := time.Duration(rep.Lease)
	if lease <= 0 {
		lease = protocol.DefaultBoardLease
	}
	// The model call ends with the claim (its timeout), when the board takes
	// the task away, or on SIGTERM.
	lost, loseIt := context.WithCancelCause(ctx)
	defer loseIt(nil)
	mctx, cancel := context.WithTimeout(lost, timeout)
	defer cancel()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		a.renewWhile(mctx, cl, t, min(lease, timeout)/3, func(err error) { loseIt(fmt.Errorf("%w: %v", errLeaseLost, err)) }, log)
	}()
	log.Info("board: asking the model", "model", a.model.name, "needs", len(rep.Context))
	ans, err := a.model.ask(mctx, boardPrompt(t, rep.Context))
	cancel()
	<-renewed

	switch {
	case err == nil: // answered (even if SIGTERM came meanwhile)
	case ctx.Err() != nil:
		a.boardRelease(cl, t, "the agent program is stopping", log)
		return
	case errors.Is(context.Cause(lost), errLeaseLost):
		log.Warn("board: the task was taken away: not answered", "err", context.Cause(lost))
		return
	case errors.Is(mctx.Err(), context.DeadlineExceeded):
		a.boardFail(cl, t, fmt.Sprintf("timeout: the model did not answer within %s", timeout), log)
		return
	default:
		log.Error("board: the model failed", "err", err)
		a.boardFail(cl, t, "the model failed: "+err.Error(), log)
		return
	}

	dir := filepath.Join(a.dir, "board", protocol.BoardKeyFile(t.Plan, t.ID)) // an agent's subtask <agent>/<id> as <agent>.<id>: one directory
	file := filepath.Join(dir, answerFile)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		err = writeAtomic(file, ans.text)
	}
	if err != nil {
		a.boardFail(cl, t, "cannot write the answer: "+err.Error(), log)
		return
	}
	res := protocol.BoardResult{Summary: board.Text(ans.text, protocol.MaxBoardSummary, false), Artifacts: []string{a.artifactRef(file)}}
	if err := retry(func(ctx context.Context) error { _, err := cl.Complete(ctx, t.Plan, t.ID, res); return err }); err != nil {
		log.Error("board: not completed: the task is asked again once its lease is over", "err", err)
		return
	}
	log.Info("board: answered", "answer_file", file, "input_tokens", ans.inputTokens, "output_tokens", ans.outputTokens)
}

// renewWhile renews the lease every period until ctx ends; lost is called
// (and renewing stops) when the board says the agent no longer holds it.
func (a *agent) renewWhile(ctx context.Context, cl *board.Client, t *protocol.BoardTask, period time.Duration, lost func(error), log *slog.Logger) {
	pace.Every(ctx, period, func() bool {
		rctx, cancel := context.WithTimeout(ctx, min(period, boardAsk))
		_, err := cl.Renew(rctx, t.Plan, t.ID)
		cancel()
		var be *protocol.BoardError
		switch {
		case err == nil:
			log.Debug("board: lease renewed")
		case errors.As(err, &be) && !protocol.BoardRetryable(be.Code) && be.Code != protocol.BoardErrInvalid:
			lost(err)
			return false
		case ctx.Err() == nil:
			log.Warn("board: lease not renewed: trying again", "err", err)
		}
		return true
	})
}

func (a *agent) boardFail(cl *board.Client, t *protocol.BoardTask, reason string, log *slog.Logger) {
	reason = board.Text(reason, protocol.MaxBoardReason, false)
	if err := retry(func(ctx context.Context) error { _, err := cl.Fail(ctx, t.Plan, t.ID, reason, nil); return err }); err != nil {
		log.Error("board: not failed: the task is asked again once its lease is over", "reason", reason, "err", err)
		return
	}
	log.Info("board: failed", "reason", reason)
}

func (a *agent) boardRelease(cl *board.Client, t *protocol.BoardTask, why string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := cl.Release(ctx, t.Plan, t.ID, why); err != nil {
		log.Warn("board: not released: another agent takes it once its lease is over", "err", err)
		return
	}
	log.Info("board: released", "why", why)
}

// retry asks the board up to three times while it does not answer (or asks
// to be asked again); a refusal is final.
func retry(do func(context.Context) error) error {
	var err error
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Duration(i) * 500 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), boardAsk)
		err = do(ctx)
		cancel()
		var be *protocol.BoardError
		if err == nil || errors.As(err, &be) && !protocol.BoardRetryable(be.Code) {
			return err
		}
	}
	return err
}

// boardPrompt is what the model is asked: the results of the tasks this one
// needs, then its prompt.
func boardPrompt(t *protocol.BoardTask, needs []protocol.BoardTask) string {
	if len(needs) == 0 {
		return t.Prompt
	}
	var b strings.Builder
	b.WriteString("This task builds on the results of the tasks it needs.\n")
	for _, n := range needs {
		fmt.Fprintf(&b, "\n## Task %s", n.ID)
		if n.Title != "" {
			fmt.Fprintf(&b, ": %s", n.Title)
		}
		b.WriteString("\n\n")
		switch {
		case n.Result != nil && n.Result.Summary != "":
			b.WriteString(strings.TrimRight(n.Result.Summary, "\n"))
		default:
			b.WriteString("(no summary)")
		}
		if n.Result != nil && len(n.Result.Artifacts) > 0 {
			fmt.Fprintf(&b, "\n\nIts artifacts: %s", strings.Join(n.Result.Artifacts, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## This task\n\n")
	b.WriteString(t.Prompt)
	return b.String()
}

// artifactRef names an answer file for the board: its path in the shared
// directory, which every agent sees as the same; else its path in the
// agent's directory.
func (a *agent) artifactRef(file string) string {
	for _, base := range []string{a.shared, a.dir} {
		if base == "" {
			continue
		}
		if rel, err := filepath.Rel(base, file); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.Base(file)
}
