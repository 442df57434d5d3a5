package protocol

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The board's rules for what a plan, a task spec and a result may hold.
// Every check reports all the problems it finds (errors.Join), each a
// *FieldError naming the field by its path in the request:
// "tasks[3].needs[0]", "result.artifacts[2]".

// BoardArtifactRule is the rule for an artifact reference: slash-separated
// names, each starting with a letter or digit (no "..", no absolute path),
// at most MaxBoardArtifactRef bytes.
const BoardArtifactRule = `^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$`

var boardArtifactPattern = regexp.MustCompile(BoardArtifactRule)

// ValidBoardStatus reports whether s is one of the task statuses.
func ValidBoardStatus(s string) bool {
	switch s {
	case BoardBlocked, BoardReady, BoardClaimed, BoardDone, BoardFailed, BoardCancelled:
		return true
	}
	return false
}

// problems collects FieldErrors under a path prefix.
type problems struct{ errs []error }

func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (p *problems) join(err error) {
	if err != nil {
		p.errs = append(p.errs, err)
	}
}

func (p *problems) err() error { return errors.Join(p.errs...) }

func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Validate checks a task spec as it stands alone: its ID (BoardIDRule's),
// exactly one of run and prompt, the sizes, its needs (well-formed task
// names, BoardTaskRefRule's: a subtask may need an agent's; none twice, not
// itself), its labels, assignee, attempts and timeout. Whether its needs
// exist is the plan's question (BoardPlan.Validate), or the board's for a
// subtask. path prefixes every field ("tasks[3]"; "" for none).
func (s BoardTaskSpec) Validate(path string) error {
	var p problems
	switch {
	case s.ID == "":
		p.add(field(path, "id"), "is required")
	case !ValidBoardID(s.ID):
		p.add(field(path, "id"), "must match %s (got %q)", BoardIDRule, clip(s.ID))
	}
	if len(s.Title) > MaxBoardTitle {
		p.add(field(path, "title"), "at most %d bytes (got %d)", MaxBoardTitle, len(s.Title))
	} else if problem := lineProblem(s.Title); problem != "" {
		p.add(field(path, "title"), "%s", problem)
	}
	switch {
	case len(s.Run) > 0 && s.Prompt != "":
		p.add(path0(path), "has both run and prompt: a task is exactly one of them")
	case len(s.Run) == 0 && s.Prompt == "":
		p.add(path0(path), "has neither run nor prompt: a task is exactly one of them")
	}
	if len(s.Run) > MaxBoardRunArgs {
		p.add(field(path, "run"), "at most %d arguments (got %d)", MaxBoardRunArgs, len(s.Run))
	}
	total := 0
	for i, a := range s.Run {
		total += len(a)
		if i == 0 && a == "" {
			p.add(field(path, "run[0]"), "the command must not be empty")
		} else if why := textProblem(a, 0); why != "" {
			p.add(field(path, fmt.Sprintf("run[%d]", i)), "%s", why)
		}
	}
	if total > MaxBoardRunBytes {
		p.add(field(path, "run"), "at most %d bytes in all (got %d)", MaxBoardRunBytes, total)
	}
	if why := textProblem(s.Prompt, MaxBoardPrompt); why != "" {
		p.add(field(path, "prompt"), "%s", why)
	}
	if len(s.Needs) > MaxBoardNeeds {
		p.add(field(path, "needs"), "at most %d (got %d)", MaxBoardNeeds, len(s.Needs))
	}
	seen := map[string]int{}
	for i, n := range s.Needs {
		f := field(path, fmt.Sprintf("needs[%d]", i))
		switch j, dup := seen[n]; {
		case !ValidBoardTaskRef(n):
			p.add(f, "must be a task ID matching %s (got %q)", BoardTaskRefRule, clip(n))
		case n == s.ID:
			p.add(f, "a task cannot need itself (%q)", n)
		case dup:
			p.add(f, "%q is already needs[%d]", n, j)
		default:
			seen[n] = i
		}
	}
	p.join(checkLabels(field(path, "labels"), s.Labels))
	if s.Assignee != "" && !ValidAgentID(s.Assignee) {
		p.add(field(path, "assignee"), "%s", (&AgentIDError{ID: clip(s.Assignee)}).Error())
	}
	if s.Attempts < 0 || s.Attempts > MaxBoardAttempts {
		p.add(field(path, "attempts"), "must be between 0 (the default, %d) and %d (got %d)", DefaultBoardAttempts, MaxBoardAttempts, s.Attempts)
	}
	if s.Timeout < 0 || time.Duration(s.Timeout) > MaxBoardTimeout {
		p.add(field(path, "timeout"), "must be between 0 (the default, %s) and %s (got %s)", DefaultBoardTimeout, MaxBoardTimeout, time.Duration(s.Timeout))
	}
	return p.err()
}

// path0 names the spec itself in an error ("tasks[3]", or "task").
func path0(path string) string {
	if path == "" {
		return "task"
	}
	return path
}

// checkLabels checks a list of labels: the rule, how many, none twice.
func checkLabels(path string, labels []string) error {
	var p problems
	if len(labels) > MaxBoardLabels {
		p.add(path, "at most %d (got %d)", MaxBoardLabels, len(labels))
	}
	seen := map[string]int{}
	for i, l := range labels {
		f := fmt.Sprintf("%s[%d]", path, i)
		if j, dup := seen[l]; dup {
			p.add(f, "%q is already %s[%d]", l, path, j)
			continue
		}
		seen[l] = i
		if !ValidBoardLabel(l) {
			p.add(f, "must match %s (got %q)", BoardLabelRule, clip(l))
		}
	}
	return p.err()
}

// CheckBoardLabels checks an agent's labels as the deploy gives them.
func CheckBoardLabels(path string, labels []string) error { return checkLabels(path, labels) }

// lineProblem says what is wrong with a one-line text ("" for nothing).
func lineProblem(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must be one line without control characters"
		}
	}
	return ""
}

// Validate checks a whole plan: its ID, every task (Validate), the IDs
// unique, every need a task of the plan, and no cycle (each reported with
// its path, "a -> b -> c -> a").
func (pl BoardPlan) Validate() error {
	var p problems
	switch {
	case pl.Plan == "":
		p.add("plan", "is required (the plan's ID)")
	case !ValidBoardID(pl.Plan):
		p.add("plan", "must match %s (got %q)", BoardIDRule, clip(pl.Plan))
	}
	switch {
	case len(pl.Tasks) == 0:
		p.add("tasks", "a plan needs at least one task")
	case len(pl.Tasks) > MaxBoardPlanTasks:
		p.add("tasks", "at most %d (got %d)", MaxBoardPlanTasks, len(pl.Tasks))
		return p.err() // not worth checking each of so many
	}
	index := map[string]int{}
	for i, s := range pl.Tasks {
		path := fmt.Sprintf("tasks[%d]", i)
		p.join(s.Validate(path))
		if s.ID == "" {
			continue
		}
		if j, dup := index[s.ID]; dup {
			p.add(path+".id", "%q is also tasks[%d]'s ID", s.ID, j)
			continue
		}
		index[s.ID] = i
	}
	for i, s := range pl.Tasks {
		for k, n := range s.Needs {
			switch _, ok := index[n]; {
			case ok || !ValidBoardTaskRef(n) || n == s.ID:
			case BoardTaskOwner(n) != OperatorUser:
				p.add(fmt.Sprintf("tasks[%d].needs[%d]", i, k), "%q is an agent's subtask: a plan's tasks need only tasks of the plan", n)
			default:
				p.add(fmt.Sprintf("tasks[%d].needs[%d]", i, k), "%q is not a task of the plan", n)
			}
		}
	}
	for _, c := range cycles(pl.Tasks, index) {
		p.add(fmt.Sprintf("tasks[%d].needs", index[c[0]]), "a cycle: %s", strings.Join(c, " -> "))
	}
	return p.err()
}

// cycles finds the cycles among the tasks' needs (depth first, in the
// tasks' order); each is reported once, as the path that closes it
// (its first task repeated at the end).
func cycles(tasks []BoardTaskSpec, index map[string]int) [][]string {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make([]int, len(tasks))
	var (
		out  [][]string
		path []int
	)
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for _, n := range tasks[i].Needs {
			j, ok := index[n]
			if !ok || j == i {
				continue // reported elsewhere: unknown, or itself
			}
			switch state[j] {
			case unseen:
				visit(j)
			case onPath:
				var c []string
				for k := len(path) - 1; k >= 0; k-- {
					if path[k] == j {
						for _, x := range path[k:] {
							c = append(c, tasks[x].ID)
						}
						break
					}
				}
				out = append(out, append(c, tasks[j].ID))
			}
		}
		path = path[:len(path)-1]
		state[i] = finished
	}
	for i := range tasks {
		if state[i] == unseen && index[tasks[i].ID] == i {
			visit(i)
		}
	}
	return out
}

// Validate checks what a holder leaves: the summary's size, at most
// MaxBoardArtifacts references, each a safe name (BoardArtifactRule) of at
// most MaxBoardArtifactRef bytes. path prefixes every field ("result").
func (r BoardResult) Validate(path string) error {
	var p problems
	if why := textProblem(r.Summary, MaxBoardSummary); why != "" {
		p.add(field(path, "summary"), "%s", why)
	}
	if len(r.Artifacts) > MaxBoardArtifacts {
		p.add(field(path, "artifacts"), "at most %d (got %d)", MaxBoardArtifacts, len(r.Artifacts))
	}
	for i, a := range r.Artifacts {
		if why := artifactProblem(a); why != "" {
			p.add(field(path, fmt.Sprintf("artifacts[%d]", i)), "%s", why)
		}
	}
	return p.err()
}

// CheckBoardArtifactName checks one artifact name (a put's or a get's, a
// file the runtime would put) by the rule a result's references follow.
func CheckBoardArtifactName(path, name string) error {
	if why := artifactProblem(name); why != "" {
		return &FieldError{Field: path, Problem: why}
	}
	return nil
}

// artifactProblem says what is wrong with an artifact reference: "" for nothing.
func artifactProblem(a string) string {
	switch {
	case len(a) > MaxBoardArtifactRef:
		return fmt.Sprintf("at most %d bytes (got %d)", MaxBoardArtifactRef, len(a))
	case !boardArtifactPattern.MatchString(a):
		return fmt.Sprintf("must match %s: names without \"..\" or a leading \"/\" (got %q)", BoardArtifactRule, clip(a))
	}
	return ""
}

// CheckBoardReason checks a reason a holder or the operator gives.
func CheckBoardReason(path, reason string) error {
	if why := textProblem(reason, MaxBoardReason); why != "" {
		return &FieldError{Field: path, Problem: why}
	}
	return nil
}

// textProblem says what is wrong with a free text of at most max bytes (0:
// no bound of its own): "" for nothing.
func textProblem(s string, max int) string {
	switch {
	case max > 0 && len(s) > max:
		return fmt.Sprintf("at most %d bytes (got %d)", max, len(s))
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain a NUL byte"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	return ""
}
