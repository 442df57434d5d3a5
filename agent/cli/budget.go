package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

const budgetUsage = `usage: flock-agent budget [list]               every agent's spending against its budget
       flock-agent budget raise AGENT TOKENS   add TOKENS to AGENT's limit for its current period
       flock-agent budget reset AGENT          start AGENT's current period over (nothing spent or raised)
`

// budgetCmd shows, raises and resets the agents' model budgets: the
// gateway's ledger on the bus. Raising and resetting are here only, not on
// the operator's MCP server: an AI coordinator that could raise budgets
// would defeat them.
func budgetCmd(ctx context.Context, args []string, env Env, sio IO) int {
	o := newOperatorCmd("budget", env, sio)
	o.fs.Usage = func() { fmt.Fprint(sio.Err, budgetUsage); o.fs.PrintDefaults() }
	if code, ok := o.parse(args); !ok {
		return code
	}
	rest := o.fs.Args()
	verb := "list"
	if len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
	}
	var change func(context.Context, *operator.Client) (protocol.LedgerEntry, error)
	switch {
	case verb == "list" && len(rest) == 0:
		return budgetList(ctx, o)
	case verb == "raise" && len(rest) == 2:
		tokens, err := strconv.ParseInt(rest[1], 10, 64)
		if err != nil || tokens <= 0 {
			fmt.Fprintf(sio.Err, "flock-agent: budget raise: TOKENS must be a positive whole number (got %q)\n", rest[1])
			return ExitUsage
		}
		change = func(ctx context.Context, cl *operator.Client) (protocol.LedgerEntry, error) {
			return cl.RaiseBudget(ctx, rest[0], tokens)
		}
	case verb == "reset" && len(rest) == 1:
		change = func(ctx context.Context, cl *operator.Client) (protocol.LedgerEntry, error) {
			return cl.ResetBudget(ctx, rest[0])
		}
	default:
		fmt.Fprint(sio.Err, budgetUsage)
		return ExitUsage
	}
	if err := protocol.ValidateLedgerKey(rest[0]); err != nil {
		fmt.Fprintln(sio.Err, "flock-agent: budget:", err)
		return ExitUsage
	}
	var e protocol.LedgerEntry
	if code := o.run(ctx, 10*time.Second, func(ctx context.Context, cl *operator.Client) (int, error) {
		var err error
		e, err = change(ctx, cl)
		switch {
		case errors.Is(err, ledger.ErrNoEntry):
			fmt.Fprintln(sio.Err, "flock-agent: budget:", err)
			return ExitUnknownAgent, nil
		case errors.Is(err, ledger.ErrNoBudget):
			fmt.Fprintln(sio.Err, "flock-agent: budget:", err)
			return ExitUsage, nil
		}
		return ExitOK, err
	}); code != ExitOK {
		return code
	}
	printBudgets(o, []protocol.LedgerEntry{e})
	return ExitOK
}

func budgetList(ctx context.Context, o *operatorCmd) int {
	var all []protocol.LedgerEntry
	if code := o.run(ctx, 10*time.Second, func(ctx context.Context, cl *operator.Client) (code int, err error) {
		all, err = cl.Budgets(ctx)
		return ExitOK, err
	}); code != ExitOK {
		return code
	}
	printBudgets(o, all)
	return ExitOK
}

func printBudgets(o *operatorCmd, all []protocol.LedgerEntry) {
	if o.c.json {
		for _, e := range all {
			b, _ := json.Marshal(e)
			fmt.Fprintln(o.sio.Out, string(b))
		}
		return
	}
	tw := tabwriter.NewWriter(o.sio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSPENT\tLIMIT\tLEFT\tWINDOW\tSTARTS OVER\tUPDATED")
	for _, e := range all {
		limit, left := "none", "-"
		if l := e.Limit(); l > 0 {
			limit, left = strconv.FormatInt(l, 10), strconv.FormatInt(e.Left(), 10)
			if e.Raised > 0 {
				limit += fmt.Sprintf(" (%d raised)", e.Raised)
			}
		}
		window, reset := "none", "never"
		if e.Window != "" {
			window, reset = e.Window+" "+e.Period, e.Reset.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s by %s\n", e.Agent, e.Spent, limit, left, window, reset,
			e.Updated.UTC().Format(time.RFC3339), e.By)
	}
	tw.Flush()
}
