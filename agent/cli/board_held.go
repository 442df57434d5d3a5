package cli

// The board commands an agent runs on the tasks it claims and holds:
// claim, complete, fail, renew, release, and adding subtasks.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
)

func boardClaim(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board claim", asAgentOnly, env, sio)
	plan := b.fs.String("plan", "", "only a task of this plan")
	task := b.fs.String("task", "", "this task (with --plan)")
	kind := b.fs.String("kind", "", "only a task of this kind: run or prompt (default: either)")
	if code, ok := b.parse(args, 0, "board claim [--plan P] [--task T] [--kind run|prompt]"); !ok {
		return code
	}
	if *kind != "" && *kind != protocol.BoardKindRun && *kind != protocol.BoardKindPrompt {
		fmt.Fprintf(sio.Err, "%s: --kind %q: run or prompt\n", b.name, *kind)
		return ExitUsage
	}
	return b.run(ctx, boardWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		rep, err := bc.Claim(ctx, *plan, *task, *kind)
		if err != nil {
			return 0, err
		}
		out := struct {
			Task    *protocol.BoardTask  `json:"task"`
			Context []protocol.BoardTask `json:"context"`
		}{rep.Task, rep.Context}
		if out.Context == nil {
			out.Context = []protocol.BoardTask{}
		}
		if b.c.json {
			printJSON(sio.Out, out)
		} else {
			j, _ := json.MarshalIndent(out, "", "  ")
			fmt.Fprintln(sio.Out, string(j))
		}
		return ExitOK, nil
	})
}

// boardHeld runs renew, release, fail and complete: a task the agent holds.
func boardHeld(ctx context.Context, op string, args []string, env Env, sio IO) int {
	b := newBoardCmd("board "+op, asAgentOnly, env, sio)
	var reason, summary *string
	var artifacts multiFlag
	usage := "board " + op + " PLAN TASK"
	switch op {
	case "release":
		reason = b.fs.String("reason", "", "why it is handed back")
		usage += " [--reason R]"
	case "fail":
		reason = b.fs.String("reason", "", "why it failed (required)")
		usage += " --reason R"
	case "complete":
		summary = b.fs.String("summary", "", "what was done: the tasks that need this one read it")
		b.fs.Var(&artifacts, "artifact", "a reference to something it produced (repeatable)")
		usage += " --summary S [--artifact REF]..."
	}
	if code, ok := b.parse(args, 2, usage); !ok {
		return code
	}
	if op == "fail" && strings.TrimSpace(*reason) == "" {
		fmt.Fprintf(sio.Err, "%s: --reason: required\n", b.name)
		return ExitUsage
	}
	plan, task := b.pos[0], b.pos[1]
	return ask(ctx, b, func(ctx context.Context, bc *board.Client) (*protocol.BoardTask, error) {
		switch op {
		case "renew":
			return bc.Renew(ctx, plan, task)
		case "release":
			return bc.Release(ctx, plan, task, *reason)
		case "fail":
			return bc.Fail(ctx, plan, task, *reason, nil)
		}
		return bc.Complete(ctx, plan, task, protocol.BoardResult{Summary: *summary, Artifacts: artifacts})
	}, did(map[string]string{"renew": "renewed", "release": "released", "fail": "failed", "complete": "completed"}[op]))
}

func boardAdd(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board add", asAgentOnly, env, sio)
	var spec protocol.BoardTaskSpec
	b.fs.StringVar(&spec.ID, "id", "", "the subtask's ID: the board makes it <agent>/ID, in this agent's namespace (required)")
	b.fs.StringVar(&spec.Title, "title", "", "a title")
	b.fs.StringVar(&spec.Prompt, "prompt", "", "a prompt task: the text for an AI agent")
	run := b.fs.Bool("run", false, "a run task: the command after --")
	needs := b.fs.String("needs", "", "tasks of the plan it waits for, comma-separated (an agent's subtask: <agent>/<id>)")
	labels := b.fs.String("labels", "", "labels an agent must have to claim it, comma-separated")
	b.fs.StringVar(&spec.Assignee, "assignee", "", "only this agent may claim it")
	b.fs.IntVar(&spec.Attempts, "attempts", 0, "claims before it fails (default: the board's)")
	timeout := b.fs.Duration("timeout", 0, "its lease and run timeout (default: the board's)")
	b.takesCommand = true
	const usage = "board add PLAN UNDER --id ID [--title T] [--needs A,B] [--labels L,...] (--prompt TEXT | --run -- COMMAND [ARGS...])"
	if code, ok := b.parse(args, 2, usage); !ok {
		return code
	}
	switch {
	case spec.ID == "":
		fmt.Fprintf(sio.Err, "%s: --id: required\n", b.name)
		return ExitUsage
	case *run && len(b.rest) == 0:
		fmt.Fprintf(sio.Err, "%s: --run: give the command after --\n", b.name)
		return ExitUsage
	case !*run && len(b.rest) > 0:
		fmt.Fprintf(sio.Err, "%s: a command after -- needs --run\n", b.name)
		return ExitUsage
	case *run == (spec.Prompt != ""):
		fmt.Fprintf(sio.Err, "%s: give --prompt TEXT or --run -- COMMAND, one of the two\n", b.name)
		return ExitUsage
	}
	spec.Run, spec.Needs, spec.Labels, spec.Timeout = b.rest, splitList(*needs), splitList(*labels), protocol.Duration(*timeout)
	return ask(ctx, b, func(ctx context.Context, bc *board.Client) (*protocol.BoardTask, error) {
		return bc.Add(ctx, b.pos[0], b.pos[1], spec)
	}, did("added"))
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
