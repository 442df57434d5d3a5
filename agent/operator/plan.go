package operator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ai-flock/ai-flock/protocol"
)

// A plan file is YAML:
//
//	plan: release-1          # optional: the file's name without its extension
//	tasks:
//	  - id: build
//	    title: Build the images
//	    run: [make, images]  # a list: the command and its arguments (no shell)
//	    timeout: 20m
//	  - id: review
//	    prompt: Review the diff of the release branch.
//	    needs: [build]
//	    labels: [reviewer]
//
// The loader reads the file and nothing more: what a plan may hold (IDs,
// kinds, limits, dependencies and their cycles) is the board service's to
// say, and it refuses a bad plan naming every problem. CheckPlan says it
// offline, by the same rules (protocol.BoardPlan.Validate), each problem
// with its line.

// planFile and taskFile are the file as written; taskFile has the keys of
// protocol.BoardTaskSpec (a test keeps the two alike).
type planFile struct {
	Plan  string     `yaml:"plan"`
	Tasks []taskFile `yaml:"tasks"`
}

type taskFile struct {
	ID       string       `yaml:"id"`
	Title    string       `yaml:"title"`
	Run      runList      `yaml:"run"`
	Prompt   string       `yaml:"prompt"`
	Needs    []string     `yaml:"needs"`
	Labels   []string     `yaml:"labels"`
	Assignee string       `yaml:"assignee"`
	Attempts int          `yaml:"attempts"`
	Timeout  fileDuration `yaml:"timeout"`
}

// runList is a task's command: a YAML list, never a string (the board runs
// no shell, so a string would be one program named by the whole line).
type runList []string

func (r *runList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return typeError(n, "run: a list (the program and its arguments, e.g. run: [make, test]), not the string %q: no shell splits it", n.Value)
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return typeError(n, "run: a list of strings (the program and its arguments)")
	}
	*r = l
	return nil
}

// fileDuration reads "30s", "5m", "1h30m" or a number of seconds.
type fileDuration time.Duration

func (d *fileDuration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!null":
			return nil
		case "!!int", "!!float":
			if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f*float64(time.Second) < float64(1<<62) {
				*d = fileDuration(f * float64(time.Second))
				return nil
			}
		case "!!str":
			if v, err := time.ParseDuration(n.Value); err == nil {
				*d = fileDuration(v)
				return nil
			}
		}
	}
	return typeError(n, "timeout: a duration such as 30s, 5m or 1h (got %q)", n.Value)
}

func typeError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}

// LoadPlan reads a plan file (see ParsePlan).
func LoadPlan(path string) (protocol.BoardPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return protocol.BoardPlan{}, err
	}
	return ParsePlan(path, b)
}

// ParsePlan reads a plan file's bytes; path names it in errors and gives
// the plan its ID when the file sets none (the base name without its
// extension, which must then be a valid plan ID). An unknown key, a run
// given as a string, an empty file or a plan without tasks is refused
// naming the line.
func ParsePlan(path string, data []byte) (protocol.BoardPlan, error) {
	fail := func(format string, args ...any) (protocol.BoardPlan, error) {
		return protocol.BoardPlan{}, fmt.Errorf("%s: "+format, append([]any{path}, args...)...)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f planFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return fail("empty: a plan file has tasks: (and optionally plan:)")
		}
		return protocol.BoardPlan{}, fmt.Errorf("%s: %s", path, yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fail("line %d: a second YAML document: a plan file holds one plan", extra.Line)
	} else if !errors.Is(err, io.EOF) {
		return protocol.BoardPlan{}, fmt.Errorf("%s: %s", path, yamlMessage(err))
	}
	if len(f.Tasks) == 0 {
		return fail("no tasks: list the plan's tasks under tasks:")
	}
	p := protocol.BoardPlan{Plan: f.Plan, Tasks: make([]protocol.BoardTaskSpec, len(f.Tasks))}
	if p.Plan == "" {
		base := filepath.Base(path)
		p.Plan = strings.TrimSuffix(base, filepath.Ext(base))
		if !protocol.ValidBoardID(p.Plan) {
			return fail("the plan is named after the file, but %q is not a plan ID (%s: letters, digits, '_' and '-', at most 64, starting with a letter or digit): set plan: in the file", p.Plan, protocol.BoardIDRule)
		}
	}
	for i, t := range f.Tasks {
		p.Tasks[i] = protocol.BoardTaskSpec{
			ID: t.ID, Title: t.Title, Run: []string(t.Run), Prompt: t.Prompt, Needs: t.Needs, Labels: t.Labels,
			Assignee: t.Assignee, Attempts: t.Attempts, Timeout: protocol.Duration(t.Timeout),
		}
	}
	return p, nil
}

// PlanProblem is one problem of a plan file: the field it is in
// ("tasks[3].needs[0]"), the line of the file it is on (0: none, as for a
// plan named after its file), and what is wrong.
type PlanProblem struct {
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"`
	Problem string `json:"problem"`
}

func (p PlanProblem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", p.Line, p.Field, p.Problem)
	}
	return p.Field + ": " + p.Problem
}

// CheckPlan reads a plan file and checks it as apply does before it writes
// anything (protocol.BoardPlan.Validate: IDs, kinds, every limit, unknown
// and duplicate IDs, cycles), with no bus: the plan, and every problem with
// its line. err is a file that cannot be read or parsed (an unknown key, a
// run that is not a list: ParsePlan's errors, which name their line).
func CheckPlan(path string) (protocol.BoardPlan, []PlanProblem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return protocol.BoardPlan{}, nil, err
	}
	p, err := ParsePlan(path, data)
	if err != nil {
		return p, nil, err
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc) // ParsePlan read it: it parses
	var out []PlanProblem
	for _, e := range flatten(p.Validate()) {
		pr := PlanProblem{Problem: e.Error()}
		var fe *protocol.FieldError
		if errors.As(e, &fe) {
			pr.Field, pr.Problem, pr.Line = fe.Field, fe.Problem, lineOf(&doc, fe.Field)
		}
		out = append(out, pr)
	}
	return p, out, nil
}

// flatten lists the problems err joins, and the ones they join (a plan's
// Validate joins each task's).
func flatten(err error) []error {
	var out []error
	for _, e := range protocol.Problems(err) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			out = append(out, flatten(errors.Join(j.Unwrap()...))...)
			continue
		}
		out = append(out, e)
	}
	return out
}

var fieldStep = regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`)

// lineOf is the line of the node a field path ("tasks[3].needs[0]") names
// in the document, or of the deepest node on its way that the document has
// (0 for none).
func lineOf(doc *yaml.Node, field string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	line := 0
	for _, m := range fieldStep.FindAllStringSubmatch(field, -1) {
		var next *yaml.Node
		switch {
		case m[1] != "" && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == m[1] {
					next = n.Content[i+1]
				}
			}
		case m[2] != "" && n.Kind == yaml.SequenceNode:
			if i, err := strconv.Atoi(m[2]); err == nil && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			break
		}
		n, line = next, next.Line
	}
	return line
}

var unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type operator\.(\w+)$`)

// yamlMessage rewrites the decoder's messages in the file's terms: the
// unknown key and its line, the keys that are known there.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	lines := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			where, known := "at the top", "plan, tasks"
			if m[3] == "taskFile" {
				where, known = "in a task", "id, title, run, prompt, needs, labels, assignee, attempts, timeout"
			}
			e = fmt.Sprintf("line %s: unknown key %q %s (known: %s)", m[1], m[2], where, known)
		}
		e = strings.NewReplacer("operator.planFile", "a plan (plan:, tasks:)", "operator.taskFile", "a task",
			"[]operator.taskFile", "a list of tasks").Replace(e)
		lines = append(lines, e)
	}
	return strings.Join(lines, "; ")
}
