// Package cli is the flock-agent command line: the agent itself (default),
// its container healthcheck, the built-in tools, and the operator commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/agent/cabundle"
	"github.com/ai-flock/ai-flock/agent/tool"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// Version is stamped at build time (-ldflags "-X github.com/ai-flock/ai-flock/agent/cli.Version=...").
var Version = "dev"

// Exit codes of every subcommand.
const (
	ExitOK           = 0 // done; every task result ok
	ExitTaskFailed   = 1 // a task ran and failed (non-zero exit, timeout, rejected, error); health: unhealthy
	ExitUsage        = 2 // bad command line or configuration
	ExitBus          = 3 // cannot connect to or publish on the bus
	ExitTimeout      = 4 // gave up waiting for results or a confirmation
	ExitUnknownAgent = 5 // no such agent (no consumer on the bus) or no agents at all
)

// Env is how the CLI reads its environment (os.Getenv in main).
type Env func(string) string

// IO are the standard streams.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

const usage = `usage: flock-agent [command] [flags]

Agent (in its container):
  run               run the agent (the default): configured from the environment
  health            exit 0 iff the running agent recently confirmed its bus connection
  init [--rate B] [--burst B] [--max-line B] [-- COMMAND...]
                    the task's PID 1 on aws: runs COMMAND (default: run) with its
                    output held to B bytes a second (bursts, lines), the excess
                    counted in notes; not dumpable, so the agent's processes
                    cannot take the container's output from it
  tool NAME ARGS    tiny built-in programs for exec tasks (flock-agent tool help)
  mcp               MCP server on stdio for an agent program: send, read_inbox,
                    roster, task_context and the board's board_list, board_claim,
                    board_renew, board_complete, board_fail, board_release,
                    board_add, as this agent (its own bus key)
  inbox ack ID|FILE...
                    take messages: move them from the inbox to inbox/taken/,
                    where they may be pruned (untaken ones never are)
  board claim [--plan P] [--task T] [--kind run|prompt]
                    take a ready task from the board; prints it and its context
  board renew|release PLAN TASK, board fail PLAN TASK --reason R,
  board complete PLAN TASK --summary S [--artifact REF]...,
  board add PLAN UNDER --id ID (--prompt TEXT | --run -- COMMAND [ARGS...])
                    the tasks it holds, as this agent (flock-agent board help)

Operator (common flags: --nats URL, --nkey FILE, --json):
  task (--agent ID | --pool | --all) [flags] -- COMMAND [ARGS...]
                    publish a task and wait for its result(s)
  send --to ID MESSAGE...   put a message in an agent's inbox (sent as "operator")
  broadcast MESSAGE...      announce to every agent
  watch             print heartbeats, events, results and dead letters live
  agents            list the agents with their last heartbeat
  top [--every D] [--lines N] [--once]
                    live dashboard: every agent's state, task, heartbeat, tokens
                    against its budget, recent failures, the board, the bus;
                    s sort, / filter, enter an agent's recent log lines, q quit
  logs AGENT [--lines N]
                    an agent's recent log lines, as it answers on the bus
  audit [--since T] [--agent ID] [--kind K]
                    the audit trail as JSON lines: who did what on the bus, when,
                    with what outcome (never a body); T: 90m, 24h or an RFC 3339 time
  audit verify [--anchor SEQ:HASH]...
                    check the trail's hash chain, retention's checkpoint and the
                    anchored heads: 0 whole, 1 an entry edited, deleted or cut off,
                    or entries not recorded (lost, over a share, not written)
  egress [--since T] [--agent ID] [--suggest]
                    each agent's way out, from the audit trail: hosts, connections,
                    requests, refusals, bytes; --suggest: the rules that would have
                    allowed its refusals (JSON), to review and paste into
                    flock:gateway.egress: nothing is allowed by itself
  dead              list parked (dead-letter) tasks
  budget [list | raise AGENT TOKENS | reset AGENT]
                    the agents' model spending against their budgets (the
                    gateway's ledger); raise and reset are here only
  plan check FILE   check a plan file as apply would, offline (no bus, no key):
                    each problem with its line, exit 1 when there is one
  plan apply FILE [--dry-run]
                    write a plan file (YAML: plan, tasks) to the board; prints
                    each task's change; --dry-run: what it would do, writing
                    nothing (flock-agent plan help)
  plan wait (PLAN | FILE) [--timeout D]
                    until every task is done (0), one failed or was cancelled and
                    nothing left can run (1), or D passed (4)
  board list [--plan P] [--status S,...] | show PLAN TASK
                    the board's tasks (as the agent inside an agent's environment
                    unless --operator or --nkey; --as-agent forces it)
  board cancel PLAN TASK [--reason R] | retry PLAN TASK
  board watch [--plan P]
                    every transition live, with progress and the critical path left
  mcp --operator    the operator's MCP server on stdio: run_task, list_agents,
                    send, broadcast, recent_events, dead_letters, budgets,
                    board_apply, board_list, board_show, board_cancel, board_retry
  version           print the version

Exit codes: 0 ok, 1 task failed (health: unhealthy; board: refused, or the
plan failed; plan check: a problem), 2 usage, 3 bus error (board: no board
service answers), 4 timed out waiting, 5 unknown agent (or, for send, not
connected).
`

// Main runs the command line and returns the exit code. ctx is cancelled
// on SIGTERM or SIGINT (main): the agent drains, operator commands stop.
func Main(ctx context.Context, args []string, env Env, sio IO) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runAgent(ctx, env, sio)
	case "health":
		return health(env, sio)
	case "init":
		return initCmd(args, sio)
	case "tool":
		return tool.Main(args, sio.In, sio.Out, sio.Err)
	case "mcp":
		return mcpCmd(ctx, args, env, sio)
	case "inbox":
		return inboxCmd(args, env, sio)
	case "task":
		return taskCmd(ctx, args, env, sio)
	case "send":
		return sendCmd(ctx, args, env, sio)
	case "broadcast":
		return broadcastCmd(ctx, args, env, sio)
	case "watch":
		return watchCmd(ctx, args, env, sio)
	case "agents":
		return agentsCmd(ctx, args, env, sio)
	case "top":
		return topCmd(ctx, args, env, sio)
	case "logs":
		return logsCmd(ctx, args, env, sio)
	case "audit":
		return auditCmd(ctx, args, env, sio)
	case "egress":
		return egressCmd(ctx, args, env, sio)
	case "budget":
		return budgetCmd(ctx, args, env, sio)
	case "dead":
		return deadCmd(ctx, args, env, sio)
	case "plan":
		return planCmdMain(ctx, args, env, sio)
	case "board":
		return boardCmdMain(ctx, args, env, sio)
	case "version", "--version":
		fmt.Fprintln(sio.Out, Version)
		return ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(sio.Out, usage)
		return ExitOK
	default:
		fmt.Fprintf(sio.Err, "flock-agent: unknown command %q\n\n%s", cmd, usage)
		return ExitUsage
	}
}

func runAgent(ctx context.Context, env Env, sio IO) int {
	cfg, err := worker.FromEnv(env)
	if err != nil {
		fmt.Fprintf(sio.Err, "flock-agent: configuration:\n%v\n", err)
		return ExitUsage
	}
	cfg.Version = Version
	log, recent, closeLog := worker.NewLogger(cfg, sio.Out)
	defer closeLog()
	cfg.Recent = recent
	// With brokered egress the tools of its tasks and program verify the
	// gateway's leaves with the flock's CA: the bundle their variables name
	// is written before anything runs, or the agent does not start.
	if ca := env(protocol.EnvEgressCA); ca != "" {
		used, err := cabundle.Write(protocol.EgressCABundleFile, ca, cabundle.SystemBundles)
		if err != nil {
			log.Error("the egress CA bundle", "file", protocol.EgressCABundleFile, "err", err)
			return ExitUsage
		}
		log.Info("egress CA bundle written", "file", protocol.EgressCABundleFile, "system_roots", used)
	}
	if err := worker.Run(ctx, cfg, log); err != nil { // until main's context ends (SIGTERM), then drain
		log.Error("agent failed", "err", err)
		return ExitBus
	}
	return ExitOK
}

func health(env Env, sio IO) int {
	file := env("STATUS_FILE")
	if file == "" {
		file = worker.DefaultStatusFile
	}
	maxAge := worker.DefaultHealthMaxAge
	if v := env("HEALTH_MAX_AGE"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			maxAge = d
		}
	}
	h, err := worker.CheckHealth(file, maxAge)
	if err != nil {
		fmt.Fprintln(sio.Err, "unhealthy:", err)
		return ExitTaskFailed
	}
	// The bus is reported, not judged: see worker.CheckHealth.
	fmt.Fprintf(sio.Out, "healthy (%s, bus %s)\n", h.State, h.Bus)
	return ExitOK
}

// common holds the operator flags every command shares.
type common struct {
	url, nkey string
	seed      string // $FLOCK_NKEY_SEED: the seed itself, never a flag (argv is visible to every user)
	json      bool
}

func (c *common) register(fs *flag.FlagSet, env Env) {
	url := env(protocol.EnvCLINATSURL)
	if url == "" {
		url = worker.DefaultURL
	}
	fs.StringVar(&c.url, "nats", url, "bus URL ($FLOCK_NATS_URL)")
	fs.StringVar(&c.nkey, "nkey", env(protocol.EnvCLINkeyFile), "operator nkey seed file ($FLOCK_NKEY_FILE; or the seed itself in $FLOCK_NKEY_SEED)")
	c.seed = env(protocol.EnvCLINkeySeed)
	fs.BoolVar(&c.json, "json", false, "print JSON (one object per line) instead of text")
}

func newFlagSet(name string, sio IO) *flag.FlagSet {
	fs := flag.NewFlagSet("flock-agent "+name, flag.ContinueOnError)
	fs.SetOutput(sio.Err)
	return fs
}

// parse parses args; it returns false (and the exit code) on a usage error or -h.
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	return 0, true
}

// within calls fn under a time limit (0: none) and returns its exit code,
// or the one exitFor prints and maps its error to.
func within(ctx context.Context, limit time.Duration, sio IO, fn func(context.Context) (int, error)) int {
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	code, err := fn(ctx)
	if err != nil {
		return exitFor(err, sio)
	}
	return code
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
