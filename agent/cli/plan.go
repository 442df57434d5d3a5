package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

const planUsage = `usage: flock-agent plan COMMAND [flags] (common flags: --nats URL, --nkey FILE, --json)
  check FILE                 check a plan file as apply would, offline (no bus, no key):
                             every problem with its line; exit 1 when there is one
  apply FILE [--dry-run]     write a plan file to the board: prints what happened to each
                             task (created, updated, unchanged, kept and why, cancelled);
                             --dry-run: what apply would do (refused: a task of the file
                             an agent created, which apply never adopts), writing nothing;
                             exit 1 when apply would be refused
  wait PLAN|FILE [--timeout D] wait until every task of PLAN (or FILE's plan) is done (exit 0), one failed or
                             was cancelled and nothing left can run (exit 1; also when the
                             board has no task of PLAN), or D passed (exit 4)
  remove PLAN                delete every task of a finished plan (all done, failed or
                             cancelled) from the board; refused while a task is open. The
                             board also removes finished plans by itself after
                             flock:board.keepFinished (a week by default)

A plan file is YAML: plan: ID (default: the file's name without its extension)
and tasks:, each with id, and run: [PROGRAM, ARGS...] or prompt: TEXT; optionally
title, needs: [IDs], labels: [...], assignee, attempts, timeout (30s, 5m).
`

func planCmdMain(ctx context.Context, args []string, env Env, sio IO) int {
	if code, ok := groupHelp(args, planUsage, sio); ok {
		return code
	}
	switch args[0] {
	case "check":
		return planCheck(args[1:], sio)
	case "apply":
		return planApply(ctx, args[1:], env, sio)
	case "wait":
		return planWaitCmd(ctx, args[1:], env, sio)
	case "remove":
		return planRemove(ctx, args[1:], env, sio)
	}
	fmt.Fprintf(sio.Err, "flock-agent plan: unknown command %q\n\n%s", args[0], planUsage)
	return ExitUsage
}

func planApply(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("plan apply", asOperatorOnly, env, sio)
	dry := b.fs.Bool("dry-run", false, "say what apply would do (the board's checks too), writing nothing")
	if code, ok := b.parse(args, 1, "plan apply FILE [--dry-run]"); !ok {
		return code
	}
	p, err := operator.LoadPlan(b.pos[0])
	if err != nil {
		fmt.Fprintf(sio.Err, "%s: %v\n", b.name, err)
		return ExitUsage
	}
	return b.run(ctx, planWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		if !*dry {
			changes, err := bc.Apply(ctx, p)
			if err != nil {
				return 0, err
			}
			printChanges(sio, b.c.json, p.Plan, changes, false, nil)
			return ExitOK, nil
		}
		// A refused dry run says what else the apply would do, then why it
		// would be refused.
		changes, err := bc.DryRun(ctx, p)
		var be *protocol.BoardError
		if err != nil && (!errors.As(err, &be) || changes == nil) {
			return 0, err
		}
		printChanges(sio, b.c.json, p.Plan, changes, true, be)
		return ExitOK, err
	})
}

func planRemove(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("plan remove", asOperatorOnly, env, sio)
	if code, ok := b.parse(args, 1, "plan remove PLAN"); !ok {
		return code
	}
	return b.run(ctx, planWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		changes, err := bc.Remove(ctx, b.pos[0])
		if err != nil {
			return 0, err
		}
		if b.c.json {
			printJSON(sio.Out, map[string]any{"plan": b.pos[0], "changes": changes})
			return ExitOK, nil
		}
		fmt.Fprintf(sio.Out, "plan %s: %d %s deleted from the board\n", b.pos[0], len(changes), plural(len(changes), "task", "tasks"))
		return ExitOK, nil
	})
}

// RelistEvery is how often board watch and plan wait read the board again,
// for a transition whose event was lost.
var RelistEvery = 10 * time.Second

// follow subscribes to the board's transitions (of plan, or every plan),
// then lists the tasks to start from, so that no transition falls between
// the two. It calls start with the list, then step with each transition
// newer than what is known (heard, or found by reading the board again
// every RelistEvery), until one of them says stop or ctx ends. A renewal
// (the same claim, its lease moved) is taken in but is no step. tick,
// when not nil, is called after each RelistEvery, saying whether a step
// came in it.
func follow(ctx context.Context, bc *board.Client, nc *nats.Conn, plan string,
	start func(*tracker) bool, step func(tr *tracker, t protocol.BoardTask, prev string) bool, tick func(tr *tracker, stepped bool)) error {
	subject := protocol.SubjectBoardEvents
	if plan != "" {
		subject = protocol.BoardEventSubject(plan, "*")
	}
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(subject, ch)
	if err != nil {
		return fmt.Errorf("board events: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fctx, cancel := context.WithTimeout(ctx, boardWait)
	defer cancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		return fmt.Errorf("board events: %w", err)
	}
	list, err := bc.List(ctx, plan)
	if err != nil {
		return err
	}
	tr := newTracker()
	for _, t := range list {
		tr.put(t)
	}
	if start(tr) {
		return nil
	}
	// The events are at most once (one published over a connection to a
	// dying node is lost): the board is read again now and then, and what
	// changed unseen is stepped through as if it had been heard.
	relist := time.NewTicker(RelistEvery)
	defer relist.Stop()
	stepped := false
	take := func(t protocol.BoardTask) bool {
		old, known := tr.tasks[t.Key()]
		prev, changed := tr.put(t)
		if !changed || (known && renewal(old, t)) {
			return false
		}
		stepped = true
		return step(tr, t, prev)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-relist.C:
			list, err := bc.List(ctx, plan)
			if err != nil {
				continue // the bus may be between leaders: the next tick tries again
			}
			sort.Slice(list, func(i, j int) bool { return list[i].Revision < list[j].Revision })
			for _, t := range list {
				if take(t) {
					return nil
				}
			}
			if tick != nil {
				tick(tr, stepped)
			}
			stepped = false
		case m := <-ch:
			var t protocol.BoardTask
			if json.Unmarshal(m.Data, &t) != nil || t.Plan == "" || t.ID == "" {
				continue
			}
			if take(t) {
				return nil
			}
		}
	}
}

// transition is one line (or JSON object) about a task that changed.
func transition(sio IO, asJSON bool, t protocol.BoardTask, prev string, p progress) {
	if asJSON {
		printJSON(sio.Out, map[string]any{"task": t, "from": prev, "progress": p})
		return
	}
	at := t.Updated
	if at.IsZero() {
		at = time.Now()
	}
	from := prev
	if from == "" {
		from = "new"
	}
	fmt.Fprintf(sio.Out, "%s %s -> %s\n  %s\n", at.Local().Format("15:04:05.000"), from, taskLine(t), p)
}

func boardWatch(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board watch", asOperatorOnly, env, sio)
	plan := b.fs.String("plan", "", "only this plan")
	if code, ok := b.parse(args, 0, "board watch [--plan P]"); !ok {
		return code
	}
	return b.run(ctx, 0, func(ctx context.Context, bc *board.Client, nc *nats.Conn) (int, error) {
		err := follow(ctx, bc, nc, *plan, func(tr *tracker) bool {
			for _, p := range tr.plans() {
				pr := progressOf(p, tr.plan(p))
				if b.c.json {
					printJSON(sio.Out, map[string]any{"progress": pr})
				} else {
					fmt.Fprintln(sio.Out, pr)
				}
			}
			return false
		}, func(tr *tracker, t protocol.BoardTask, prev string) bool {
			transition(sio, b.c.json, t, prev, progressOf(t.Plan, tr.plan(t.Plan)))
			return false
		}, func(tr *tracker, stepped bool) {
			for _, p := range tr.plans() {
				b.printWaiting(p, tr.plan(p), stepped)
			}
		})
		if ctx.Err() != nil {
			return ExitOK, nil // interrupted: the watch's normal end
		}
		return ExitOK, err
	})
}

func planWaitCmd(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("plan wait", asOperatorOnly, env, sio)
	timeout := b.fs.Duration("timeout", 0, "give up after this long (exit 4; default: wait on)")
	if code, ok := b.parse(args, 1, "plan wait (PLAN | FILE) [--timeout D]"); !ok {
		return code
	}
	plan := b.pos[0]
	if ext := filepath.Ext(plan); ext == ".yaml" || ext == ".yml" {
		// A plan file: wait for the plan it names.
		p, err := operator.LoadPlan(plan)
		if err != nil {
			fmt.Fprintf(sio.Err, "%s: %v\n", b.name, err)
			return ExitUsage
		}
		plan = p.Plan
	}
	if !protocol.ValidBoardID(plan) {
		fmt.Fprintf(sio.Err, "%s: %q is not a plan ID (%s)\n", b.name, plan, protocol.BoardIDRule)
		return ExitUsage
	}
	code := ExitTimeout
	last := progress{Plan: plan}
	finish := func(tr *tracker) bool {
		tasks := tr.plan(plan)
		last = progressOf(plan, tasks)
		over, ok := verdict(tasks)
		if !over {
			return false
		}
		code = ExitOK
		if !ok {
			code = ExitTaskFailed
		}
		b.verdictLines(tasks, last, ok)
		return true
	}
	rc := b.run(ctx, *timeout, func(ctx context.Context, bc *board.Client, nc *nats.Conn) (int, error) {
		err := follow(ctx, bc, nc, plan, func(tr *tracker) bool {
			if len(tr.plan(plan)) == 0 {
				code = ExitTaskFailed
				fmt.Fprintf(sio.Err, "%s: plan %s has no tasks on the board (apply it first)\n", b.name, plan)
				return true
			}
			if !b.c.json {
				fmt.Fprintln(sio.Out, progressOf(plan, tr.plan(plan)))
			}
			return finish(tr)
		}, func(tr *tracker, t protocol.BoardTask, prev string) bool {
			transition(sio, b.c.json, t, prev, progressOf(plan, tr.plan(plan)))
			return finish(tr)
		}, func(tr *tracker, stepped bool) { b.printWaiting(plan, tr.plan(plan), stepped) })
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			if b.c.json {
				printJSON(sio.Out, map[string]any{"plan": plan, "result": "timeout", "progress": last})
			}
			fmt.Fprintf(sio.Err, "%s: timed out after %s: %s\n", b.name, *timeout, last)
			return ExitTimeout, nil
		}
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(sio.Err, "%s: interrupted: %s\n", b.name, last)
			return ExitTimeout, nil
		}
		return code, err
	})
	return rc
}

// printWaiting says what plan waits on, when nothing moved in the last
// RelistEvery or a holder has gone silent (nothing when it is over).
func (b *boardCmd) printWaiting(plan string, tasks map[string]protocol.BoardTask, stepped bool) {
	if over, _ := verdict(tasks); over {
		return
	}
	ws := waitingOn(tasks, time.Now())
	if len(ws) == 0 || (stepped && !anySilent(ws)) {
		return
	}
	if b.c.json {
		printJSON(b.sio.Out, map[string]any{"plan": plan, "waitingOn": ws})
		return
	}
	fmt.Fprint(b.sio.Out, waitingText(plan, ws))
}

// verdictLines prints how waiting for a plan ended.
func (b *boardCmd) verdictLines(tasks map[string]protocol.BoardTask, p progress, ok bool) {
	if b.c.json {
		result := "done"
		if !ok {
			result = "failed"
		}
		printJSON(b.sio.Out, map[string]any{"plan": p.Plan, "result": result, "progress": p})
		return
	}
	if ok {
		fmt.Fprintf(b.sio.Out, "plan %s: all %d %s done\n", p.Plan, p.Total, plural(p.Total, "task", "tasks"))
		return
	}
	var lost []string
	for _, t := range tasks {
		if t.Status == protocol.BoardFailed || t.Status == protocol.BoardCancelled {
			lost = append(lost, taskLine(t))
		}
	}
	sort.Strings(lost)
	fmt.Fprintf(b.sio.Out, "plan %s: nothing left can run (%d of %d done):\n  %s\n", p.Plan, p.Done, p.Total, strings.Join(lost, "\n  "))
}
