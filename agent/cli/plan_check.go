package cli

// A plan's checks before it is applied: plan check (offline) and how apply,
// and its dry run, print their changes.

import (
	"fmt"
	"strings"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// printChanges prints what an apply did (or a dry run says it would do),
// one line a task and the counts; refused is a dry run's refusal.
func printChanges(sio IO, asJSON bool, plan string, changes []protocol.BoardChange, dry bool, refused *protocol.BoardError) {
	counts := map[string]int{}
	for _, c := range changes {
		counts[c.Change]++
	}
	if asJSON {
		out := map[string]any{"plan": plan, "changes": changes, "counts": counts}
		if dry {
			out["dryRun"] = true
		}
		if refused != nil {
			out["refused"] = map[string]string{"code": refused.Code, "error": refused.Msg}
		}
		printJSON(sio.Out, out)
		return
	}
	for _, c := range changes {
		line := fmt.Sprintf("%-9s %s/%s (%s)", c.Change, plan, c.Task, c.Status)
		if c.Why != "" {
			line += ": " + c.Why
		}
		fmt.Fprintln(sio.Out, line)
	}
	var total []string
	for _, k := range []string{protocol.BoardCreated, protocol.BoardUpdated, protocol.BoardUnchanged, protocol.BoardKept, protocol.BoardRemoved, protocol.BoardRefused} {
		if counts[k] > 0 {
			total = append(total, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	head := "plan " + plan
	if dry {
		head += " (dry run: nothing written)"
	}
	fmt.Fprintf(sio.Out, "%s: %d %s: %s\n", head, len(changes), plural(len(changes), "task", "tasks"), strings.Join(total, ", "))
}

// planCheck checks a plan file as apply would, with no bus: exit 0 when it
// has no problem, 1 naming each (with its line) when it has, 2 for a usage
// error.
func planCheck(args []string, sio IO) int {
	const usage = "plan check FILE [--json]"
	fs := newFlagSet("plan check", sio)
	asJSON := fs.Bool("json", false, "the plan's problems as JSON")
	fs.Usage = func() {
		fmt.Fprintln(sio.Err, "usage: flock-agent "+usage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if code, ok := parse(fs, args); !ok {
			return code
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(sio.Err, "flock-agent plan check: want 1 argument (the plan file), got %d\n", len(pos))
		fs.Usage()
		return ExitUsage
	}
	file := pos[0]
	p, problems, err := operator.CheckPlan(file)
	if err != nil {
		if *asJSON {
			printJSON(sio.Out, map[string]any{"file": file, "ok": false, "error": err.Error()})
		}
		fmt.Fprintf(sio.Err, "flock-agent plan check: %v\n", err)
		return ExitTaskFailed
	}
	if *asJSON {
		if problems == nil {
			problems = []operator.PlanProblem{}
		}
		printJSON(sio.Out, map[string]any{"file": file, "plan": p.Plan, "tasks": len(p.Tasks), "ok": len(problems) == 0, "problems": problems})
	} else if len(problems) == 0 {
		fmt.Fprintf(sio.Out, "%s: plan %s: %d %s, no problem\n", file, p.Plan, len(p.Tasks), plural(len(p.Tasks), "task", "tasks"))
	}
	if len(problems) == 0 {
		return ExitOK
	}
	if !*asJSON {
		for _, pr := range problems {
			if pr.Line > 0 {
				fmt.Fprintf(sio.Err, "%s:%d: %s: %s\n", file, pr.Line, pr.Field, pr.Problem)
			} else {
				fmt.Fprintf(sio.Err, "%s: %s: %s\n", file, pr.Field, pr.Problem)
			}
		}
		fmt.Fprintf(sio.Err, "%s: plan %s: %d %s: apply would refuse it\n", file, p.Plan, len(problems), plural(len(problems), "problem", "problems"))
	}
	return ExitTaskFailed
}
