package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// tracker is the board as a watcher sees it: the tasks it listed, updated
// by the transitions published since (subscribed before listing, so none
// is missed; an older copy of a task never replaces a newer one).
type tracker struct {
	tasks map[string]protocol.BoardTask // by key
}

func newTracker() *tracker { return &tracker{tasks: map[string]protocol.BoardTask{}} }

// put records t; it returns false when t is not newer than what is known,
// and the status it had before ("" when new).
func (tr *tracker) put(t protocol.BoardTask) (prev string, changed bool) {
	cur, ok := tr.tasks[t.Key()]
	if ok {
		if t.Revision != 0 && cur.Revision != 0 {
			if t.Revision <= cur.Revision {
				return cur.Status, false
			}
		} else if t.Updated.Before(cur.Updated) {
			return cur.Status, false
		}
		prev = cur.Status
	}
	tr.tasks[t.Key()] = t
	return prev, true
}

// plan returns the plan's tasks by ID.
func (tr *tracker) plan(plan string) map[string]protocol.BoardTask {
	out := map[string]protocol.BoardTask{}
	for _, t := range tr.tasks {
		if t.Plan == plan {
			out[t.ID] = t
		}
	}
	return out
}

func (tr *tracker) plans() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range tr.tasks {
		if !seen[t.Plan] {
			seen[t.Plan] = true
			out = append(out, t.Plan)
		}
	}
	sort.Strings(out)
	return out
}

// progress is a plan's tasks counted by status, and the critical path left:
// the longest chain of tasks not done (nor cancelled) by their needs.
type progress struct {
	Plan         string `json:"plan"`
	Total        int    `json:"total"`
	Done         int    `json:"done"`
	Ready        int    `json:"ready"`
	Claimed      int    `json:"claimed"`
	Blocked      int    `json:"blocked"`
	Failed       int    `json:"failed"`
	Cancelled    int    `json:"cancelled"`
	CriticalLeft int    `json:"criticalPathLeft"` // in tasks
}

func (p progress) String() string {
	s := fmt.Sprintf("%s: %d/%d done, %d ready, %d claimed, %d blocked, %d failed", p.Plan, p.Done, p.Total, p.Ready, p.Claimed, p.Blocked, p.Failed)
	if p.Cancelled > 0 {
		s += fmt.Sprintf(", %d cancelled", p.Cancelled)
	}
	return s + fmt.Sprintf("; critical path left: %d %s", p.CriticalLeft, plural(p.CriticalLeft, "task", "tasks"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// inPlan leaves out the tasks an edited plan file removed (cancelled by
// the board with protocol.BoardRemovedReason): they are no longer the plan's.
func inPlan(tasks map[string]protocol.BoardTask) map[string]protocol.BoardTask {
	out := make(map[string]protocol.BoardTask, len(tasks))
	for id, t := range tasks {
		if t.Status != protocol.BoardCancelled || t.Reason != protocol.BoardRemovedReason {
			out[id] = t
		}
	}
	return out
}

func progressOf(plan string, tasks map[string]protocol.BoardTask) progress {
	tasks = inPlan(tasks)
	p := progress{Plan: plan, Total: len(tasks)}
	for _, t := range tasks {
		switch t.Status {
		case protocol.BoardDone:
			p.Done++
		case protocol.BoardReady:
			p.Ready++
		case protocol.BoardClaimed:
			p.Claimed++
		case protocol.BoardBlocked:
			p.Blocked++
		case protocol.BoardFailed:
			p.Failed++
		case protocol.BoardCancelled:
			p.Cancelled++
		}
	}
	left := func(t protocol.BoardTask) bool {
		return t.Status != protocol.BoardDone && t.Status != protocol.BoardCancelled
	}
	depth := map[string]int{} // -1: being computed (a cycle the service would have refused: not followed)
	var chain func(id string) int
	chain = func(id string) int {
		if d, ok := depth[id]; ok {
			return max(d, 0)
		}
		depth[id] = -1
		longest := 0
		for _, n := range tasks[id].Needs {
			if nt, ok := tasks[n]; ok && left(nt) {
				longest = max(longest, chain(n))
			}
		}
		depth[id] = longest + 1
		return longest + 1
	}
	for id, t := range tasks {
		if left(t) {
			p.CriticalLeft = max(p.CriticalLeft, chain(id))
		}
	}
	return p
}

// verdict says whether waiting for the plan is over: every task done (ok),
// or one failed or was cancelled and nothing left can run (each task not
// done failed, was cancelled, or waits on such a task).
func verdict(tasks map[string]protocol.BoardTask) (over, ok bool) {
	tasks = inPlan(tasks)
	doomed := map[string]bool{}
	seen := map[string]bool{}
	var isDoomed func(id string) bool
	isDoomed = func(id string) bool {
		if seen[id] {
			return doomed[id]
		}
		seen[id] = true
		t, ok := tasks[id]
		switch {
		case !ok:
			return false
		case t.Status == protocol.BoardFailed || t.Status == protocol.BoardCancelled:
			doomed[id] = true
		case t.Status == protocol.BoardBlocked:
			for _, n := range t.Needs {
				if isDoomed(n) {
					doomed[id] = true
					break
				}
			}
		}
		return doomed[id]
	}
	allDone, lost, canRun := true, false, false
	for id, t := range tasks {
		if t.Status == protocol.BoardDone {
			continue
		}
		allDone = false
		if t.Status == protocol.BoardFailed || t.Status == protocol.BoardCancelled {
			lost = true
		} else if !isDoomed(id) {
			canRun = true
		}
	}
	switch {
	case allDone:
		return true, true
	case lost && !canRun:
		return true, false
	}
	return false, false
}

// Printing.

func printJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(w, string(b))
}

func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func attemptsOf(t protocol.BoardTask) string {
	max := t.BoardTaskSpec.Attempts
	if max == 0 {
		max = protocol.DefaultBoardAttempts
	}
	return fmt.Sprintf("%d/%d", t.Attempts, max)
}

// when is how old a task's state is, or for a claimed task its lease left.
func when(t protocol.BoardTask, now time.Time) string {
	if t.Status == protocol.BoardClaimed && !t.LeaseUntil.IsZero() {
		if left := t.LeaseUntil.Sub(now); left > 0 {
			return "lease " + left.Round(time.Second).String() + " left"
		}
		return "lease expired"
	}
	if t.Updated.IsZero() {
		return "-"
	}
	return now.Sub(t.Updated).Round(time.Second).String() + " ago"
}

func printTable(w io.Writer, tasks []protocol.BoardTask) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tTASK\tSTATUS\tHOLDER\tATTEMPTS\tAGE/LEASE\tTITLE\tREASON")
	for _, t := range tasks {
		holder := t.Holder
		if holder == "" {
			holder = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Plan, t.ID, t.Status, holder, attemptsOf(t), when(t, now), short(t.Title, 40), short(t.Reason, 60))
	}
	_ = tw.Flush()
}

// taskLine is one line about a task.
func taskLine(t protocol.BoardTask) string {
	s := fmt.Sprintf("%s/%s %s", t.Plan, t.ID, t.Status)
	if t.Holder != "" {
		s += " by " + t.Holder
	}
	if t.Status == protocol.BoardClaimed && !t.LeaseUntil.IsZero() {
		s += ", lease until " + t.LeaseUntil.Local().Format("15:04:05")
	}
	if t.Reason != "" {
		s += ": " + short(t.Reason, 200)
	}
	return s
}

// printTask prints everything about a task.
func printTask(w io.Writer, t protocol.BoardTask) {
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-10s%s\n", k, strings.ReplaceAll(v, "\n", "\n"+strings.Repeat(" ", 10)))
		}
	}
	row("task", t.Plan+"/"+t.ID)
	row("title", t.Title)
	status := t.Status
	if t.Holder != "" {
		status += " by " + t.Holder
	}
	if t.Status == protocol.BoardClaimed {
		status += " (" + when(t, time.Now()) + ")"
	}
	row("status", status)
	row("reason", t.Reason)
	if len(t.Run) > 0 {
		row("run", strings.Join(quoteArgs(t.Run), " "))
	} else {
		row("prompt", strings.TrimRight(t.Prompt, "\n"))
	}
	row("needs", strings.Join(t.Needs, ", "))
	row("labels", strings.Join(t.Labels, ", "))
	row("assignee", t.Assignee)
	row("attempts", attemptsOf(t)+" used")
	timeout := time.Duration(t.Timeout)
	if timeout == 0 {
		timeout = protocol.DefaultBoardTimeout
	}
	row("timeout", timeout.String())
	row("parent", t.Parent)
	var created []string
	if !t.Created.IsZero() {
		created = append(created, t.Created.Local().Format(time.RFC3339))
	}
	if t.CreatedBy != "" {
		created = append(created, "by "+t.CreatedBy)
	}
	row("created", strings.Join(created, " "))
	if !t.Updated.IsZero() {
		row("updated", t.Updated.Local().Format(time.RFC3339))
	}
	if r := t.Result; r != nil {
		row("summary", r.Summary)
		row("artifacts", strings.Join(r.Artifacts, ", "))
		if r.ExitCode != nil {
			row("exit code", fmt.Sprint(*r.ExitCode))
		}
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`") {
			out[i] = fmt.Sprintf("%q", a)
		}
	}
	return out
}
