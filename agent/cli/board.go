package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

const boardUsage = `usage: flock-agent board COMMAND [flags] [ARGS]

The operator's (common flags: --nats URL, --nkey FILE, --json):
  list [--plan P] [--status S,...]   the tasks: plan, task, status, holder,
                                     attempts, age or lease left, title, reason
  show PLAN TASK                     one task, everything (its result too)
  get PLAN TASK NAME [-o FILE]       a task's artifact (to stdout, or FILE)
  cancel PLAN TASK [--reason R]      cancel a task that is not done
  retry PLAN TASK                    put a failed or cancelled task back
  watch [--plan P]                   every transition live, each with the plan's
                                     progress and its critical path left

An agent's, inside its container or task: as that agent, with its own key
(FLOCK_AGENT_ID or AGENT_ID, FLOCK_NATS_URL or NATS_URL, FLOCK_NKEY_FILE or
NATS_NKEY_FILE, as flock-agent mcp; --nats and --nkey override them):
  claim [--plan P] [--task T] [--kind run|prompt]
                                     take a ready task; prints it and the results
                                     of the tasks it needs (JSON)
  renew PLAN TASK                    extend the lease on a task it holds
  complete PLAN TASK --summary S [--artifact REF]...
  fail PLAN TASK --reason R
  release PLAN TASK [--reason R]     hand a held task back
  put PLAN TASK FILE [--name N]      store FILE as an artifact of a task it holds
                                     (at most 256 KiB; name: FILE's base name)
  get PLAN TASK NAME [-o FILE]       an artifact it put, or of a task its held
                                     task needs
  add PLAN UNDER --id ID [--title T] [--needs A,B] [--labels L,...]
      (--prompt TEXT | --run -- COMMAND [ARGS...])
                                     add a subtask under a task it holds: its ID
                                     is the agent's, <agent>/ID (the reply names it)

list and show run as the agent when FLOCK_AGENT_ID (or AGENT_ID) is set and
neither --nkey nor $FLOCK_NKEY_SEED gives an operator key; --as-agent or
--operator says which. A refusal prints the board's message and code and
exits 1; no board service answering exits 3.
`

// Which side a board command asks as.
const (
	asOperatorOnly = iota
	asAgentOnly
	asEither
)

// boardWait bounds one request to the board (apply: planWait).
const (
	boardWait = 15 * time.Second
	planWait  = time.Minute
)

// boardCmd is a board command: the operator's flags, which side it asks
// as, and its positional arguments (flags may follow them).
type boardCmd struct {
	*operatorCmd
	name            string
	side            int
	asAgent, asOper *bool
	agent           bool
	takesCommand    bool            // what follows "--" is a command (add --run)
	set             map[string]bool // the flags given
	pos, rest       []string        // positional arguments; what follows "--"
}

func newBoardCmd(name string, side int, env Env, sio IO) *boardCmd {
	b := &boardCmd{operatorCmd: newOperatorCmd(name, env, sio), name: "flock-agent " + name, side: side}
	if side == asAgentOnly {
		b.fs.Lookup("nkey").Usage = "the agent's nkey seed file (default: $FLOCK_NKEY_FILE, else $NATS_NKEY_FILE)"
		b.fs.Lookup("nats").Usage = "bus URL (default: $FLOCK_NATS_URL, else $NATS_URL)"
	}
	if side == asEither {
		b.asAgent = b.fs.Bool("as-agent", false, "ask as the agent the environment names (FLOCK_AGENT_ID, its key)")
		b.asOper = b.fs.Bool("operator", false, "ask as the operator even inside an agent's environment")
	}
	return b
}

// parse parses flags and positional arguments in any order; it returns
// false (and the exit code) on a usage error or -h. want is the number of
// positional arguments (-1: any).
func (b *boardCmd) parse(args []string, want int, usage string) (int, bool) {
	b.fs.Usage = func() {
		fmt.Fprintln(b.sio.Err, "usage: flock-agent "+usage)
		b.fs.PrintDefaults()
	}
	if i := slices.Index(args, "--"); i >= 0 {
		args, b.rest = args[:i], args[i+1:]
	}
	for {
		if code, ok := parse(b.fs, args); !ok {
			return code, false
		}
		if args = b.fs.Args(); len(args) == 0 {
			break
		}
		b.pos, args = append(b.pos, args[0]), args[1:]
	}
	if len(b.rest) > 0 && !b.takesCommand {
		fmt.Fprintf(b.sio.Err, "%s: unexpected arguments after --: %s\n", b.name, strings.Join(b.rest, " "))
		return ExitUsage, false
	}
	if want >= 0 && len(b.pos) != want {
		fmt.Fprintf(b.sio.Err, "%s: want %d argument(s), got %d\n", b.name, want, len(b.pos))
		b.fs.Usage()
		return ExitUsage, false
	}
	b.set = map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { b.set[f.Name] = true })
	switch b.side {
	case asAgentOnly:
		b.agent = true
	case asEither:
		if *b.asAgent && *b.asOper {
			fmt.Fprintf(b.sio.Err, "%s: --as-agent or --operator, not both\n", b.name)
			return ExitUsage, false
		}
		id := strings.TrimSpace(b.env("FLOCK_AGENT_ID")) + strings.TrimSpace(b.env(protocol.EnvAgentID))
		b.agent = *b.asAgent || (!*b.asOper && id != "" && !b.set["nkey"] && b.c.seed == "")
	}
	return 0, true
}

// run connects as the side parse chose and calls fn with the board's
// client and the connection, under a time limit (0: none). fn's error is
// printed and mapped (a refusal: ExitTaskFailed).
func (b *boardCmd) run(ctx context.Context, limit time.Duration, fn func(context.Context, *board.Client, *nats.Conn) (int, error)) int {
	if !b.agent {
		return b.operatorCmd.run(ctx, limit, func(ctx context.Context, cl *operator.Client) (int, error) {
			return fn(ctx, board.NewOperatorClient(cl.Conn()), cl.Conn())
		})
	}
	env := func(k string) string {
		switch {
		case k == protocol.EnvCLINATSURL && b.set["nats"]:
			return b.c.url
		case k == protocol.EnvCLINkeyFile && b.set["nkey"]:
			return b.c.nkey
		}
		return b.env(k)
	}
	cfg, nc, code := agentMCPConn(env, b.sio, b.name)
	if nc == nil {
		return code
	}
	defer nc.Close()
	return within(ctx, limit, b.sio, func(ctx context.Context) (int, error) { return fn(ctx, board.NewAgentClient(nc, cfg.ID), nc) })
}

// ask runs one request to the board (under boardWait) and prints its
// answer: its JSON with --json, else as text writes it.
func ask[T any](ctx context.Context, b *boardCmd, req func(context.Context, *board.Client) (T, error), text func(io.Writer, T)) int {
	return b.run(ctx, boardWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		v, err := req(ctx, bc)
		if err != nil {
			return 0, err
		}
		if b.c.json {
			printJSON(b.sio.Out, v)
		} else {
			text(b.sio.Out, v)
		}
		return ExitOK, nil
	})
}

// did writes a task the board returned as what was done to it (verb) and
// its line.
func did(verb string) func(io.Writer, *protocol.BoardTask) {
	return func(w io.Writer, t *protocol.BoardTask) { fmt.Fprintf(w, "%s %s\n", verb, taskLine(*t)) }
}

// groupHelp answers a command group (board, plan) called with no command or
// for help: its usage, on stderr and a usage error when no command came.
func groupHelp(args []string, usage string, sio IO) (int, bool) {
	if len(args) == 0 {
		fmt.Fprint(sio.Err, usage)
		return ExitUsage, true
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(sio.Out, usage)
		return ExitOK, true
	}
	return 0, false
}

func boardCmdMain(ctx context.Context, args []string, env Env, sio IO) int {
	if code, ok := groupHelp(args, boardUsage, sio); ok {
		return code
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return boardList(ctx, args, env, sio)
	case "show":
		return boardShow(ctx, args, env, sio)
	case "cancel", "retry":
		return boardCancelRetry(ctx, sub, args, env, sio)
	case "watch":
		return boardWatch(ctx, args, env, sio)
	case "claim":
		return boardClaim(ctx, args, env, sio)
	case "renew", "release", "fail", "complete":
		return boardHeld(ctx, sub, args, env, sio)
	case "add":
		return boardAdd(ctx, args, env, sio)
	case "put":
		return boardPut(ctx, args, env, sio)
	case "get":
		return boardGet(ctx, args, env, sio)
	}
	fmt.Fprintf(sio.Err, "flock-agent board: unknown command %q\n\n%s", sub, boardUsage)
	return ExitUsage
}

var boardStatuses = []string{protocol.BoardBlocked, protocol.BoardReady, protocol.BoardClaimed, protocol.BoardDone, protocol.BoardFailed, protocol.BoardCancelled}

func boardList(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board list", asEither, env, sio)
	plan := b.fs.String("plan", "", "only this plan's tasks")
	status := b.fs.String("status", "", "only tasks of these statuses, comma-separated ("+strings.Join(boardStatuses, ", ")+")")
	if code, ok := b.parse(args, 0, "board list [--plan P] [--status S,...] [--as-agent | --operator]"); !ok {
		return code
	}
	var statuses []string
	for _, s := range strings.Split(*status, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(boardStatuses, s) {
			fmt.Fprintf(sio.Err, "%s: --status %q: not a status (%s)\n", b.name, s, strings.Join(boardStatuses, ", "))
			return ExitUsage
		}
		statuses = append(statuses, s)
	}
	return b.run(ctx, boardWait, func(ctx context.Context, bc *board.Client, _ *nats.Conn) (int, error) {
		tasks, err := bc.List(ctx, *plan, statuses...)
		if err != nil {
			return 0, err
		}
		if b.c.json {
			for _, t := range tasks {
				printJSON(sio.Out, t)
			}
			return ExitOK, nil
		}
		printTable(sio.Out, tasks)
		return ExitOK, nil
	})
}

func boardShow(ctx context.Context, args []string, env Env, sio IO) int {
	b := newBoardCmd("board show", asEither, env, sio)
	if code, ok := b.parse(args, 2, "board show PLAN TASK [--as-agent | --operator]"); !ok {
		return code
	}
	return ask(ctx, b, func(ctx context.Context, bc *board.Client) (*protocol.BoardTask, error) {
		return bc.Show(ctx, b.pos[0], b.pos[1])
	}, func(w io.Writer, t *protocol.BoardTask) { printTask(w, *t) })
}

func boardCancelRetry(ctx context.Context, op string, args []string, env Env, sio IO) int {
	b := newBoardCmd("board "+op, asOperatorOnly, env, sio)
	usage := "board retry PLAN TASK"
	var reason *string
	if op == "cancel" {
		reason = b.fs.String("reason", "", "why (kept on the task)")
		usage = "board cancel PLAN TASK [--reason R]"
	}
	if code, ok := b.parse(args, 2, usage); !ok {
		return code
	}
	return ask(ctx, b, func(ctx context.Context, bc *board.Client) (*protocol.BoardTask, error) {
		if op == "cancel" {
			return bc.Cancel(ctx, b.pos[0], b.pos[1], *reason)
		}
		return bc.Retry(ctx, b.pos[0], b.pos[1])
	}, did(map[string]string{"cancel": "cancelled", "retry": "retried"}[op]))
}
