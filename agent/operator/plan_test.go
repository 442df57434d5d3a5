package operator

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

func TestParsePlanReadsAGoodFile(t *testing.T) {
	p, err := ParsePlan("plans/release.yaml", []byte(`
plan: release-1
tasks:
  - id: build
    title: Build the images
    run: [make, images]
    timeout: 20m
    attempts: 2
    labels: [builder]
  - id: review
    prompt: |
      Review the diff.
    needs: [build]
    assignee: agent-2
    timeout: 90
`))
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.BoardPlan{Plan: "release-1", Tasks: []protocol.BoardTaskSpec{
		{ID: "build", Title: "Build the images", Run: []string{"make", "images"}, Timeout: protocol.Duration(20 * time.Minute), Attempts: 2, Labels: []string{"builder"}},
		{ID: "review", Prompt: "Review the diff.\n", Needs: []string{"build"}, Assignee: "agent-2", Timeout: protocol.Duration(90 * time.Second)},
	}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
}

func TestParsePlanNamesThePlanAfterTheFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nightly-build.yml")
	if err := os.WriteFile(file, []byte("tasks:\n  - id: a\n    run: [\"true\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPlan(file)
	if err != nil || p.Plan != "nightly-build" || len(p.Tasks) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	// A name that is no plan ID is refused, not mangled: the file says which.
	_, err = ParsePlan("dir/my plan.yaml", []byte("tasks:\n  - id: a\n    prompt: x\n"))
	if err == nil || !strings.Contains(err.Error(), `"my plan" is not a plan ID`) || !strings.Contains(err.Error(), "set plan:") {
		t.Fatalf("bad plan ID from the file name: %v", err)
	}
	// plan: in the file wins over the name.
	if p, err := ParsePlan("dir/my plan.yaml", []byte("plan: ok\ntasks:\n  - id: a\n    prompt: x\n")); err != nil || p.Plan != "ok" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestParsePlanRefusesBadFiles(t *testing.T) {
	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"unknown task key", "tasks:\n  - id: a\n    prompt: x\n    neds: [b]\n", []string{"p.yaml:", "line 4", `unknown key "neds" in a task`, "needs"}},
		{"unknown top key", "plan: p\ntask:\n  - id: a\n", []string{"line 2", `unknown key "task" at the top`}},
		{"run as a string", "tasks:\n  - id: a\n    run: make test\n", []string{"line 3", "run: a list", `"make test"`}},
		{"bad timeout", "tasks:\n  - id: a\n    prompt: x\n    timeout: soon\n", []string{"line 4", "timeout:", "soon"}},
		{"empty file", "", []string{"p.yaml: empty"}},
		{"only comments", "# nothing yet\n", []string{"p.yaml: empty"}},
		{"no tasks", "plan: p\n", []string{"no tasks"}},
		{"empty task list", "plan: p\ntasks: []\n", []string{"no tasks"}},
		{"not a mapping", "- id: a\n", []string{"p.yaml:", "line 1", "a plan"}},
		{"two documents", "tasks:\n  - id: a\n    prompt: x\n---\ntasks: []\n", []string{"second YAML document"}},
		{"every problem", "tasks:\n  - id: a\n    run: ls -l\n    colour: red\n", []string{"line 3", "line 4"}},
	} {
		_, err := ParsePlan("p.yaml", []byte(c.file))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// The file's task keys are BoardTaskSpec's: a field added to the contract
// must be readable from a plan file.
func TestPlanFileKeysAreTheSpecs(t *testing.T) {
	keys := func(typ reflect.Type) []string {
		var out []string
		for i := 0; i < typ.NumField(); i++ {
			out = append(out, strings.Split(typ.Field(i).Tag.Get("yaml"), ",")[0])
		}
		slices.Sort(out)
		return out
	}
	if got, want := keys(reflect.TypeFor[taskFile]()), keys(reflect.TypeFor[protocol.BoardTaskSpec]()); !slices.Equal(got, want) {
		t.Fatalf("plan file task keys %v, BoardTaskSpec's %v", got, want)
	}
	if got, want := keys(reflect.TypeFor[planFile]()), keys(reflect.TypeFor[protocol.BoardPlan]()); !slices.Equal(got, want) {
		t.Fatalf("plan file keys %v, BoardPlan's %v", got, want)
	}
}

// The example plans the README shows load and keep the board's rules.
func TestExamplePlansAreValid(t *testing.T) {
	files, err := filepath.Glob("../../examples/plans/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example plans: %v", err)
	}
	for _, f := range files {
		p, err := LoadPlan(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".yaml"); p.Plan != want {
			t.Errorf("%s: plan %q, want it named after its file (%q)", f, p.Plan, want)
		}
	}
}

// CheckPlan says what apply would refuse, offline: every problem, each with
// its field and the line it is on.
func TestCheckPlanNamesEveryProblemWithItsLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(`tasks:
  - id: a
    prompt: x
    needs: [b]
  - id: b
    prompt: y
    needs:
      - c
      - a
  - id: c
    run: [make]
    prompt: both
    attempts: 1000
  - id: a
    prompt: again
  - id: d
    prompt: z
    needs: [ghost, agent-1/x]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, problems, err := CheckPlan(file)
	if err != nil || p.Plan != "p" {
		t.Fatalf("plan %q: %v", p.Plan, err)
	}
	var got []string
	for _, pr := range problems {
		got = append(got, pr.String())
	}
	want := []string{
		"line 10: tasks[2]: has both run and prompt: a task is exactly one of them",
		"line 13: tasks[2].attempts: must be between 0 (the default, 3) and 100 (got 1000)",
		`line 14: tasks[3].id: "a" is also tasks[0]'s ID`,
		`line 18: tasks[4].needs[0]: "ghost" is not a task of the plan`,
		`line 18: tasks[4].needs[1]: "agent-1/x" is an agent's subtask: a plan's tasks need only tasks of the plan`,
		"line 4: tasks[0].needs: a cycle: a -> b -> a",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A good file has none; one that does not parse is an error naming its line.
	if err := os.WriteFile(file, []byte("tasks:\n  - id: a\n    prompt: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, problems, err := CheckPlan(file); err != nil || len(problems) != 0 {
		t.Fatalf("a good plan: %v %v", problems, err)
	}
	if err := os.WriteFile(file, []byte("tasks:\n  - id: a\n    prompt: x\n    need: [b]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckPlan(file); err == nil || !strings.Contains(err.Error(), `line 4: unknown key "need"`) {
		t.Fatalf("an unknown key: %v", err)
	}
}
