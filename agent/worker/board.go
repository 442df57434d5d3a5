package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

// The board (protocol/board.go) is the flock's shared task list. An agent
// works its run tasks when it is idle: while one of its slots is free and no
// task of its own consumer waits for one, it claims a ready run task and runs
// it as it runs an exec task (task directory, timeout, output caps, the
// allow-listed environment), renewing the claim's lease every third of a
// lease while it runs (board_lease.go), then
// completes or fails it on the board. It holds at most one board task at a
// time, so its consumer's tasks always keep the other slots. It asks when
// the board rings (board.ready, a task became ready), every BOARD_POLL
// otherwise (the ring is a plain message: lost to an agent that was away),
// and again at once when it finished one. On drain it claims no more; a board
// task still running when the grace period ends is stopped and released, so
// another agent takes it without waiting out the lease.

const (
	// boardRequestTimeout bounds each request to the board service.
	boardRequestTimeout = 5 * time.Second
	// boardQuiet is the least time between two claims that found nothing:
	// a board that rings often does not make an idle agent ask as often.
	boardQuiet = 250 * time.Millisecond
	// boardBackoffMax is the longest wait after claims that failed.
	boardBackoffMax = 5 * time.Minute
	// boardFinishFor bounds the retries of a complete or fail the board
	// service did not answer.
	boardFinishFor = 15 * time.Second
	// boardContextFile, in the task directory, holds the tasks the claimed
	// one needs, with their results (the claim's context): a JSON array of
	// protocol.BoardTask.
	boardContextFile = "context.json"
)

// The variables a board task's process gets besides an exec task's.
const (
	envBoardPlan    = "FLOCK_BOARD_PLAN"
	envBoardTask    = "FLOCK_BOARD_TASK"
	envBoardContext = "FLOCK_BOARD_CONTEXT" // the context file's path
)

// errLeaseLost ends a run the board no longer gives this agent.
var errLeaseLost = errors.New("the board no longer gives this agent the task")

// boardLoop claims and runs the board's run tasks until ctx ends (drain).
func (a *Agent) boardLoop(ctx context.Context) {
	cl := board.NewAgentClient(a.nc, a.cfg.ID)
	ring := make(chan struct{}, 1)
	sub, err := a.nc.Subscribe(protocol.SubjectBoardReady, func(*nats.Msg) {
		select {
		case ring <- struct{}{}:
		default:
		}
	})
	if err != nil {
		a.log.Warn("board: no ready signal: asking every BOARD_POLL only", "err", err)
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	a.log.Debug("board: working its run tasks when idle", "poll", a.cfg.BoardPoll.String())

	timer := time.NewTimer(0) // the first claim at once
	defer timer.Stop()
	var (
		running   <-chan struct{} // closed when the board task in hand is finished
		slotFreed <-chan struct{} // armed when a claim was due but no slot was free
		lastEmpty time.Time       // when a claim last found nothing
		lastErr   string          // the last error told at warn level
		backoff   time.Duration   // the wait after a claim that failed (0: BOARD_POLL)
		try       bool
	)
	next := func(d time.Duration) {
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		timer.Reset(d)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ring:
			try = true
		case <-timer.C:
			try = true
		case <-slotFreed:
			try = true
		case <-running:
			running, try = nil, true
			lastEmpty = time.Time{} // at once: there may be more
		}
		if !try || running != nil {
			continue // one board task at a time; the ring is taken, the task's end wakes the loop
		}
		try = false
		if quiet := boardQuiet - time.Since(lastEmpty); quiet > 0 {
			next(quiet)
			continue
		}
		next(jitter(a.cfg.BoardPoll))
		idle, freed := a.slots.idle()
		if !idle {
			slotFreed = freed // the consumer's tasks fill every slot (or wait for one)
			continue
		}
		slotFreed = nil
		done, err := a.claimBoard(ctx, cl)
		if done != nil {
			running, lastErr, backoff = done, "", 0
			continue
		}
		lastEmpty = time.Now()
		var be *protocol.BoardError
		switch {
		case err == nil: // claimed, but the slot was taken meanwhile: released
			backoff = 0
		case errors.As(err, &be) && be.Code == protocol.BoardErrNothing:
			a.log.Debug("board: nothing to claim")
			backoff = 0
		case errors.As(err, &be) && be.Code == protocol.BoardErrLimit:
			// The agent holds all the tasks it may (its program has
			// claimed prompt tasks as this agent): normal too.
			a.log.Debug("board: the agent holds its claim limit", "err", err)
			backoff = 0
		case errors.As(err, &be) && be.Code == protocol.BoardErrBusy:
			// Past its request bounds (its program asks the board
			// often too): the client paused already; the next poll.
			a.log.Debug("board: busy", "err", err)
			backoff = 0
		case errors.Is(err, nats.ErrNoResponders):
			a.log.Debug("board: no board service answers", "err", err)
			backoff = 0
		case ctx.Err() != nil:
			return
		default:
			// Refused, or no answer at all (a bus that does not let the
			// agent ask): ask less and less often.
			backoff = min(max(2*backoff, 2*a.cfg.BoardPoll), boardBackoffMax)
			next(jitter(backoff))
			if err.Error() != lastErr {
				lastErr = err.Error()
				a.log.Warn("board: claim failed: asking again later", "err", err, "in", backoff.String())
			} else {
				a.log.Debug("board: claim failed again", "err", err, "in", backoff.String())
			}
		}
	}
}

// jitter is d ±20%.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + rand.N(2*d/5+1)
}

// claimBoard claims a run task and starts it in a free slot. done is closed
// when the task is finished and its slot free again; it is nil when nothing
// was claimed, or when a task of the consumer took the slot while the claim
// was on its way (the task is released then, at once). The slot is not held
// during the claim: a board that is slow to answer never keeps the
// consumer's tasks waiting.
func (a *Agent) claimBoard(ctx context.Context, cl *board.Client) (done <-chan struct{}, err error) {
	// Not cancelled at once by the drain: a claim the board made must reach
	// the agent, which then hands the task back, rather than wait out its
	// lease. A reply takes milliseconds; one that does not come (a bus that
	// does not let the agent ask) does not hold the drain up for long.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), boardRequestTimeout)
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-time.After(500 * time.Millisecond):
			cancel()
		case <-cctx.Done():
		}
	})
	rep, err := cl.Claim(cctx, "", "", protocol.BoardKindRun)
	stop()
	cancel()
	if err == nil && rep.Task == nil {
		err = errors.New("board: a claim's reply without a task")
	}
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		a.releaseBoard(cl, rep.Task, "the agent is stopping", a.log)
		return nil, nil
	}
	if !a.slots.tryAcquire() {
		a.log.Debug("board: a task of the agent's own took the slot: releasing the claim", "board", rep.Task.Key())
		a.releaseBoard(cl, rep.Task, "the agent became busy", a.log)
		return nil, nil
	}
	ch := make(chan struct{})
	a.inflight.Add(1)
	go func() {
		defer close(ch)
		defer a.inflight.Done()
		defer a.slots.release()
		a.runBoard(cl, rep)
	}()
	return ch, nil
}

// runBoard runs a claimed run task and leaves its end on the board: complete,
// fail, or release when the agent's grace period ended it.
func (a *Agent) runBoard(cl *board.Client, rep *protocol.BoardReply) {
	t := rep.Task
	key := t.Key()
	name := fmt.Sprintf("board-%s-%d", protocol.BoardKeyFile(t.Plan, t.ID), t.Attempts) // <plan>.<task>, an agent's <agent>/<id> as <agent>.<id>: no ID has a dot
	log := a.log.With("board", key, "attempt", t.Attempts, "task", name)
	a.boardHeld.Store(key)
	defer a.boardHeld.Store("")

	if len(t.Run) == 0 { // the board gives the kind asked for; were it not so, another agent may take it
		a.releaseBoard(cl, t, "not a run task: the agent runtime runs commands only", log)
		return
	}
	a.learnLease(rep)
	timeout := time.Duration(t.Timeout)
	if timeout <= 0 {
		timeout = protocol.DefaultBoardTimeout
	}
	// The board ends the claim at its deadline (claimed at plus the
	// timeout): the run ends a moment before, so its end is the runtime's
	// to tell (a timeout), not the sweep's.
	if d := protocol.BoardDeadline(*t); !d.IsZero() {
		if left := time.Until(d) - time.Second; left > 0 && left < timeout {
			timeout = left
		}
	}
	renew := a.renewEvery()
	needs := rep.Context
	if needs == nil {
		needs = []protocol.BoardTask{}
	}
	ctxFile, _ := json.MarshalIndent(needs, "", "  ")
	body, _ := json.MarshalIndent(t, "", "  ")
	files, err := a.neededArtifacts(cl, t, needs, log)
	if err != nil {
		a.releaseBoard(cl, t, "the artifacts of the tasks it needs are not to be had: "+err.Error(), log)
		return
	}
	files[boardContextFile] = string(ctxFile) + "\n"
	task := protocol.Task{
		V: protocol.Version, ID: name, Kind: protocol.KindExec, Command: t.Run[0], Args: t.Run[1:],
		Timeout: protocol.Duration(timeout),
		Files:   files,
	}
	dir := a.taskDir(name)
	run, lose := context.WithCancelCause(a.runCtx)
	defer lose(nil)
	x := &execRun{parent: run, env: []string{
		envBoardPlan + "=" + t.Plan,
		envBoardTask + "=" + t.ID,
		envBoardContext + "=" + filepath.Join(dir, boardContextFile),
	}}
	d := boardDelivery{data: body, key: key, attempt: t.Attempts, renew: func() {
		rctx, cancel := context.WithTimeout(context.Background(), min(renew, boardRequestTimeout))
		_, err := cl.Renew(rctx, t.Plan, t.ID)
		cancel()
		var be *protocol.BoardError
		switch {
		case err == nil:
			log.Debug("board: lease renewed")
		case errors.As(err, &be) && !protocol.BoardRetryable(be.Code) && be.Code != protocol.BoardErrInvalid:
			log.Warn("board: the lease is lost: stopping the task", "err", err)
			lose(fmt.Errorf("%w: %v", errLeaseLost, err))
		default:
			log.Warn("board: lease not renewed: trying again", "err", err, "in", renew.String())
		}
	}}
	res := protocol.Result{
		V: protocol.Version, TaskID: name, Agent: a.cfg.ID, Kind: protocol.KindExec,
		Subject: "board:" + key, Attempt: t.Attempts, Started: time.Now().UTC(),
	}
	log.Info("board task started", "command", t.Run[0], "timeout", timeout.String())
	a.event(protocol.EventBoardClaimed, key, clip(fmt.Sprintf("attempt %d in %s: %s", t.Attempts, dir, strings.Join(t.Run, " ")), 512))
	// Where the command leaves what it passes on (putArtifacts).
	if err := os.MkdirAll(filepath.Join(dir, protocol.ArtifactsDir), 0o700); err != nil {
		log.Warn("board: no artifacts directory", "err", err)
	}
	err = a.runExec(d, &task, &res, renew, x, "")
	res.Finished = time.Now().UTC()
	res.DurationMS = float64(res.Finished.Sub(res.Started).Microseconds()) / 1000
	if res.Dir != "" {
		a.writeResultFile(&res)
	}
	if a.tasksDone.Add(1)%32 == 0 {
		select {
		case a.pruneReq <- "tasks":
		default:
		}
	}

	switch {
	case errors.Is(err, errHandback):
		log.Warn("board task interrupted by shutdown: released")
		a.releaseBoard(cl, t, "the agent stopped before the task finished", log)
	case errors.Is(context.Cause(run), errLeaseLost):
		a.event(protocol.EventBoardReleased, key, context.Cause(run).Error())
	case res.OK():
		zero := 0
		out := protocol.BoardResult{Summary: tailText(x.stdoutTail, protocol.MaxBoardSummary), ExitCode: &zero}
		if out.Artifacts, err = a.putArtifacts(cl, t, dir); err != nil {
			log.Warn("board task's artifacts not put: failed", "err", err)
			a.failBoard(cl, t, clip("exit code 0, but its artifacts: "+err.Error(), protocol.MaxBoardReason), &out, log)
			return
		}
		log.Info("board task finished", "status", res.Status, "duration_ms", res.DurationMS)
		if err := a.finishBoard(func(ctx context.Context) error {
			_, err := cl.Complete(ctx, t.Plan, t.ID, out)
			return err
		}); err != nil {
			log.Error("board: not completed: the task runs again once its lease is over", "err", err)
			a.event(protocol.EventBoardFailed, key, "done, but the board did not take it: "+err.Error())
			return
		}
		a.event(protocol.EventBoardDone, key, fmt.Sprintf("exit code 0 after %s", res.Finished.Sub(res.Started).Round(time.Millisecond)))
	default:
		summary := tailText(x.stderrTail, protocol.MaxBoardSummary)
		if summary == "" {
			summary = tailText(x.stdoutTail, protocol.MaxBoardSummary)
		}
		log.Info("board task finished", "status", res.Status, "exit_code", res.ExitCode, "duration_ms", res.DurationMS)
		a.failBoard(cl, t, failReason(&res), &protocol.BoardResult{Summary: summary, ExitCode: res.ExitCode}, log)
	}
}

// boardDelivery is a claimed board task as runExec takes a delivery: its
// body (task.json), and "in progress" renews its lease.
type boardDelivery struct {
	data    []byte
	key     string
	attempt int
	renew   func()
}

func (d boardDelivery) Data() []byte         { return d.data }
func (d boardDelivery) Subject() string      { return "board:" + d.key }
func (d boardDelivery) Ack() error           { return nil }
func (d boardDelivery) Nak() error           { return nil }
func (d boardDelivery) InProgress() error    { d.renew(); return nil }
func (d boardDelivery) Headers() nats.Header { return nats.Header{} }
func (d boardDelivery) Meta() (uint64, int)  { return 0, d.attempt }
