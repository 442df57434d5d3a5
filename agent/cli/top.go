package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/top"
	"github.com/ai-flock/ai-flock/protocol"
)

// topCmd is `flock-agent top`: the live dashboard (agent/top).
func topCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("top", env, sio)
	every := o.fs.Duration("every", time.Second, "look at the queues, the board and the bus this often (heartbeats, results and events show as they come)")
	lines := o.fs.Int("lines", 50, fmt.Sprintf("log lines to ask an agent for (at most %d)", protocol.LogsKeepLines))
	onceFlag := o.fs.Bool("once", false, "listen for one period, print one frame and exit (also what a terminal that is not one gets)")
	if code, ok := o.parse(args); !ok {
		return code
	}
	if *every < 100*time.Millisecond {
		fmt.Fprintf(sio.Err, "flock-agent: --every: at least 100ms (got %s)\n", *every)
		return ExitUsage
	}
	if *lines < 1 || *lines > protocol.LogsKeepLines {
		fmt.Fprintf(sio.Err, "flock-agent: --lines: between 1 and %d (got %d)\n", protocol.LogsKeepLines, *lines)
		return ExitUsage
	}
	return o.run(ctx, 0, func(ctx context.Context, cl *operator.Client) (int, error) {
		src := &top.BusSource{Op: cl, Board: board.NewOperatorClient(cl.Conn()), BoardEvery: 5}
		opts := top.Options{Every: *every, Lines: *lines, In: sio.In, Out: sio.Out, Once: *onceFlag || !isTerminal(sio)}
		return ExitOK, top.Run(ctx, src, opts)
	})
}

// isTerminal: both the input and the output are a terminal.
func isTerminal(sio IO) bool {
	in, ok1 := sio.In.(*os.File)
	out, ok2 := sio.Out.(*os.File)
	return ok1 && ok2 && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
}

// logsCmd is `flock-agent logs AGENT`: an agent's recent log lines, as it
// answers on the bus.
func logsCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("logs", env, sio)
	lines := o.fs.Int("lines", 50, fmt.Sprintf("how many (at most %d)", protocol.LogsKeepLines))
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // the agent first, then flags
		id, args = args[0], args[1:]
	}
	if code, ok := o.parse(args); !ok {
		return code
	}
	if id == "" && o.fs.NArg() == 1 {
		id = o.fs.Arg(0)
	} else if id == "" || o.fs.NArg() != 0 {
		fmt.Fprintln(sio.Err, "flock-agent: logs: want one agent ID (flock-agent logs AGENT [--lines N])")
		return ExitUsage
	}
	if _, err := protocol.ParseAgentID(id); err != nil {
		fmt.Fprintf(sio.Err, "flock-agent: logs: %v\n", err)
		return ExitUsage
	}
	if *lines < 1 || *lines > protocol.LogsKeepLines {
		fmt.Fprintf(sio.Err, "flock-agent: --lines: between 1 and %d (got %d)\n", protocol.LogsKeepLines, *lines)
		return ExitUsage
	}
	return o.run(ctx, 10*time.Second, func(ctx context.Context, cl *operator.Client) (int, error) {
		rep, err := cl.Logs(ctx, id, *lines)
		if err != nil {
			fmt.Fprintln(sio.Err, "flock-agent:", err)
			return ExitUnknownAgent, nil
		}
		if o.c.json {
			printJSON(sio.Out, rep)
			return ExitOK, nil
		}
		for _, l := range rep.Lines {
			fmt.Fprintln(sio.Out, top.Plain(l))
		}
		return ExitOK, nil
	})
}
