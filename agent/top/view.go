package top

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// Screen is what the user chose to see.
type Screen struct {
	Sort      string
	Filter    string
	Filtering bool   // typing a filter
	Selected  string // the agent under the cursor
	Logs      *Logs  // an agent's log lines, open over the table
	Width     int
	Height    int
}

// Logs are an agent's recent log lines as it answered.
type Logs struct {
	Agent     string
	Lines     []string
	Truncated bool
	Err       string
	At        time.Time
}

const help = "s sort · / filter · ↑↓ select · enter logs · q quit"

// Render draws the dashboard.
func Render(s *State, sc Screen, now time.Time) string {
	if sc.Width <= 0 {
		sc.Width = 100
	}
	if sc.Height <= 0 {
		sc.Height = 30
	}
	var b strings.Builder
	line := func(format string, args ...any) {
		// oneLine: what agents put in heartbeats, results and logs reaches
		// the terminal only as plain text (no escape sequence of theirs).
		l := Plain(fmt.Sprintf(format, args...))
		if r := []rune(l); len(r) > sc.Width {
			l = string(r[:sc.Width])
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	line("flock top  %s  %s  %s", now.Format("15:04:05"), plural(len(s.Agents), "agent"), busLine(s.Bus))
	line("board: %s", boardLine(s.Board))
	if sc.Logs != nil {
		renderLogs(line, sc)
		return b.String()
	}
	filter := sc.Filter
	if sc.Filtering {
		filter += "▏"
	}
	if filter == "" {
		filter = "-"
	}
	line("sort: %s  filter: %s  (%s)", sc.Sort, filter, help)
	line("")
	line("  %-16s %-9s %-28s %7s %7s %6s %5s %5s  %s", "AGENT", "STATE", "TASK", "AGE", "HEARD", "DONE", "FAIL", "QUEUE", "TOKENS")
	rows := s.Rows(sc.Sort, sc.Filter, now)
	room := sc.Height - 8 - min(len(s.Failures), keepFailures)
	if room < 3 {
		room = 3
	}
	first := 0
	for i, a := range rows {
		if a.ID == sc.Selected && i >= room {
			first = i - room + 1
		}
	}
	for i, a := range rows {
		if i < first || i >= first+room {
			continue
		}
		mark := " "
		if a.ID == sc.Selected {
			mark = ">"
		}
		state := a.State
		if state == "" {
			state = "?"
		}
		if a.Stale(now) && state != protocol.StateStopped {
			state = "silent"
		}
		line("%s %-16s %-9s %-28s %7s %7s %6d %5d %5d  %s", mark, a.ID, state, taskLine(a), ageOf(a.TaskAge(now)), ageOf(a.HeartbeatAge(now)), a.Completed, a.Failed, a.Queue, tokens(a))
	}
	if hidden := len(rows) - room; hidden > 0 {
		line("  … %d more (↑↓ to scroll)", hidden)
	}
	if len(rows) == 0 {
		line("  no agents%s", map[bool]string{true: " match the filter", false: " heard yet"}[sc.Filter != ""])
	}
	line("")
	line("recent failures (since top started):")
	if len(s.Failures) == 0 {
		line("  none")
	}
	for _, f := range s.Failures {
		line("  %s %-16s %-20s %-12s %s", f.At.Format("15:04:05"), f.Agent, f.Task, f.Status, Plain(f.Why))
	}
	return b.String()
}

func renderLogs(line func(string, ...any), sc Screen) {
	l := sc.Logs
	line("logs of %s: its last %d lines, asked at %s  (esc back · r reload · q quit)", l.Agent, len(l.Lines), l.At.Format("15:04:05"))
	line("")
	if l.Err != "" {
		line("  %s", l.Err)
		return
	}
	if l.Truncated {
		line("  (older lines left out: the answer is bounded)")
	}
	lines := l.Lines
	if room := sc.Height - 5; len(lines) > room && room > 0 {
		lines = lines[len(lines)-room:]
	}
	for _, s := range lines {
		line("%s", Plain(s))
	}
}

func busLine(b Bus) string {
	if !b.Connected {
		if b.Err != "" {
			return "bus: DOWN (" + b.Err + ")"
		}
		return "bus: not connected"
	}
	s := fmt.Sprintf("bus: ok %s rtt %s", b.URL, b.RTT.Round(10*time.Microsecond))
	if b.Replicas > 1 {
		s += fmt.Sprintf("  nodes %d/%d current, leader %s", b.Current, b.Replicas, b.Leader)
	}
	if b.Reconnects > 0 {
		s += fmt.Sprintf(" reconnects %d", b.Reconnects)
	}
	s += fmt.Sprintf("  pool %d  dead letters %d", b.Pool, b.Dead)
	if b.Err != "" {
		s += "  (" + b.Err + ")"
	}
	return s
}

func boardLine(b Board) string {
	if b.Err != "" {
		return "unavailable (" + b.Err + ")"
	}
	total := b.Total()
	if total == 0 {
		return "no tasks"
	}
	done := b.ByStatus[protocol.BoardDone]
	s := fmt.Sprintf("%d/%d done %s", done, total, bar(int64(done), int64(total), 20))
	for _, st := range []string{protocol.BoardClaimed, protocol.BoardReady, protocol.BoardBlocked, protocol.BoardFailed, protocol.BoardCancelled} {
		if n := b.ByStatus[st]; n > 0 {
			s += fmt.Sprintf("  %s %d", st, n)
		}
	}
	return s + "  (" + plural(b.Plans, "plan") + ")"
}

func taskLine(a *Agent) string {
	switch {
	case len(a.Tasks) == 1:
		return short(a.Tasks[0].ID, 28)
	case len(a.Tasks) > 1:
		return short(fmt.Sprintf("%s +%d", a.Tasks[0].ID, len(a.Tasks)-1), 28)
	case a.Board != "":
		return short("board "+a.Board, 28)
	}
	return "-"
}

func tokens(a *Agent) string {
	switch {
	case !a.Budgeted:
		return "-"
	case a.Limit <= 0:
		return itoa(a.Spent) + " (no cap)"
	}
	return fmt.Sprintf("%s/%s %s", itoa(a.Spent), itoa(a.Limit), bar(a.Spent, a.Limit, 10))
}

// bar is part of whole as a bar of width cells.
func bar(part, whole int64, width int) string {
	if whole <= 0 {
		return ""
	}
	n := int(min(part, whole) * int64(width) / whole)
	return "[" + strings.Repeat("█", n) + strings.Repeat("·", width-n) + "]"
}

// ageOf is a duration as top shows it: "-" for none, else 2 significant units.
func ageOf(d time.Duration) string {
	switch {
	case d < 0:
		return "never"
	case d == 0:
		return "-"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Plain is s on one line with no control character (C0, DEL, C1): what an
// agent says reaches a terminal as text, never as an escape sequence.
func Plain(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) { // C0, DEL, C1
			return ' '
		}
		return r
	}, s)
}

// plural is "1 agent", "2 agents".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + one + "s"
}
