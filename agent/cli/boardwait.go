package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// A wait is where a plan's time goes: plan wait and board watch say, when
// nothing has moved for a while, which tasks the rest waits on and why: a
// claim and how its holder is doing (last heard, lease left, its
// deadline), or a ready task nobody has claimed.

// waitLine is one task the plan waits on.
type waitLine struct {
	Task       string   `json:"task"` // <plan>/<id>
	Status     string   `json:"status"`
	Holder     string   `json:"holder,omitempty"`
	SilentSec  float64  `json:"silentSeconds,omitempty"` // since the holder last renewed
	LeaseLeft  float64  `json:"leaseLeftSeconds"`        // until the claim ends unless renewed (< 0: overdue, the board takes it back)
	TimeoutIn  float64  `json:"timeoutInSeconds"`        // until the claim's deadline
	Dependents []string `json:"waitedOnBy,omitempty"`    // tasks of the plan that need it
	Why        string   `json:"why"`
}

// waitingOn is what the plan's tasks wait on at now: every claimed task
// and every ready one, the oldest first, each with the tasks that need it.
func waitingOn(tasks map[string]protocol.BoardTask, now time.Time) []waitLine {
	tasks = inPlan(tasks)
	needBy := map[string][]string{}
	for _, t := range tasks {
		if t.Status == protocol.BoardBlocked {
			for _, n := range t.Needs {
				needBy[n] = append(needBy[n], t.ID)
			}
		}
	}
	var out []waitLine
	var order []protocol.BoardTask
	for _, t := range tasks {
		if t.Status == protocol.BoardClaimed || t.Status == protocol.BoardReady {
			order = append(order, t)
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if !order[i].Created.Equal(order[j].Created) {
			return order[i].Created.Before(order[j].Created)
		}
		return order[i].ID < order[j].ID
	})
	for _, t := range order {
		w := waitLine{Task: t.Plan + "/" + t.ID, Status: t.Status, Holder: t.Holder, Dependents: needBy[t.ID]}
		sort.Strings(w.Dependents)
		switch t.Status {
		case protocol.BoardClaimed:
			last := t.RenewedAt
			if last.IsZero() {
				last = t.ClaimedAt
			}
			if !last.IsZero() {
				w.SilentSec = secs(now.Sub(last))
			}
			w.LeaseLeft = secs(t.LeaseUntil.Sub(now))
			if d := protocol.BoardDeadline(t); !d.IsZero() {
				w.TimeoutIn = secs(d.Sub(now))
			}
			w.Why = claimWhy(t, now)
		case protocol.BoardReady:
			w.Why = "ready: no agent has claimed it"
			if t.Assignee != "" {
				w.Why += " (only " + t.Assignee + " may)"
			} else if len(t.Labels) > 0 {
				w.Why += " (an agent with labels " + strings.Join(t.Labels, ", ") + " may)"
			}
		}
		out = append(out, w)
	}
	return out
}

// silentAfter is when a holder counts as silent to a watcher: its runtime
// renews every third of the lease (10 s by default), so longer than that
// with a margin means renewals are lost or its agent is gone.
const silentAfter = 15 * time.Second

// anySilent: some holder has been silent past silentAfter.
func anySilent(ws []waitLine) bool {
	for _, w := range ws {
		if w.Status == protocol.BoardClaimed && w.SilentSec > silentAfter.Seconds() {
			return true
		}
	}
	return false
}

func secs(d time.Duration) float64 { return d.Round(100 * time.Millisecond).Seconds() }

// claimWhy says how a claim's holder is doing.
func claimWhy(t protocol.BoardTask, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "claimed by %s", t.Holder)
	last := t.RenewedAt
	if last.IsZero() {
		last = t.ClaimedAt
	}
	if !last.IsZero() {
		fmt.Fprintf(&b, ", last heard %s ago", now.Sub(last).Round(time.Second))
	}
	switch left := t.LeaseUntil.Sub(now); {
	case t.LeaseUntil.IsZero():
	case left <= 0:
		fmt.Fprintf(&b, ", silent past its lease by %s: the board takes it back", (-left).Round(time.Second))
	default:
		fmt.Fprintf(&b, ", lease %s left", left.Round(time.Second))
	}
	if d := protocol.BoardDeadline(t); !d.IsZero() {
		fmt.Fprintf(&b, ", its timeout in %s", d.Sub(now).Round(time.Second))
	}
	return b.String()
}

// waitingText is the lines plan wait and board watch print.
func waitingText(plan string, ws []waitLine) string {
	if len(ws) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s waits on:\n", plan)
	for _, w := range ws {
		fmt.Fprintf(&b, "  %s: %s", w.Task, w.Why)
		if len(w.Dependents) > 0 {
			fmt.Fprintf(&b, "; %s %s on it", strings.Join(w.Dependents, ", "), plural(len(w.Dependents), "waits", "wait"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// renewal reports whether next is prev renewed: the same claim, the same
// holder, only its lease moved. Watchers do not print it as a change.
func renewal(prev, next protocol.BoardTask) bool {
	return prev.Status == protocol.BoardClaimed && next.Status == protocol.BoardClaimed &&
		prev.Holder == next.Holder && prev.Attempts == next.Attempts
}
