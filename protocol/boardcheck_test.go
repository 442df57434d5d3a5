package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func prompt(id string, needs ...string) BoardTaskSpec {
	return BoardTaskSpec{ID: id, Prompt: "do " + id, Needs: needs}
}

// fields lists the field of every problem err joins.
func fields(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
			return
		}
		out = append(out, "?"+e.Error())
	}
	walk(err)
	return out
}

func TestBoardTaskSpecValidate(t *testing.T) {
	long := strings.Repeat("x", 65)
	for _, c := range []struct {
		name string
		spec BoardTaskSpec
		want []string // fields with a problem, in order; nil: valid
	}{
		{"prompt", prompt("a"), nil},
		{"run", BoardTaskSpec{ID: "a_1-B", Run: []string{"make", "test"}, Labels: []string{"go", "linux-x86_64"}, Assignee: "agent-1", Attempts: 5, Timeout: Duration(time.Hour)}, nil},
		{"no id", BoardTaskSpec{Prompt: "x"}, []string{"t.id"}},
		{"bad id", BoardTaskSpec{ID: "a.b", Prompt: "x"}, []string{"t.id"}},
		{"long id", BoardTaskSpec{ID: long, Prompt: "x"}, []string{"t.id"}},
		{"both", BoardTaskSpec{ID: "a", Prompt: "x", Run: []string{"true"}}, []string{"t"}},
		{"neither", BoardTaskSpec{ID: "a"}, []string{"t"}},
		{"empty command", BoardTaskSpec{ID: "a", Run: []string{""}}, []string{"t.run[0]"}},
		{"nul arg", BoardTaskSpec{ID: "a", Run: []string{"echo", "a\x00b"}}, []string{"t.run[1]"}},
		{"too many args", BoardTaskSpec{ID: "a", Run: make65()}, []string{"t.run"}},
		{"run too long", BoardTaskSpec{ID: "a", Run: []string{"echo", strings.Repeat("y", MaxBoardRunBytes)}}, []string{"t.run"}},
		{"prompt too long", BoardTaskSpec{ID: "a", Prompt: strings.Repeat("p", MaxBoardPrompt+1)}, []string{"t.prompt"}},
		{"title too long", BoardTaskSpec{ID: "a", Prompt: "x", Title: strings.Repeat("t", MaxBoardTitle+1)}, []string{"t.title"}},
		{"title two lines", BoardTaskSpec{ID: "a", Prompt: "x", Title: "a\nb"}, []string{"t.title"}},
		{"self need", prompt("a", "b", "a"), []string{"t.needs[1]"}},
		{"dup need", prompt("a", "b", "b"), []string{"t.needs[1]"}},
		{"bad needs", prompt("a", "B/c", "a/b/c", "../x", "agent-1/", "/x"), []string{"t.needs[0]", "t.needs[1]", "t.needs[2]", "t.needs[3]", "t.needs[4]"}},
		{"an agent's subtask as a need", prompt("a", "agent-1/x", "b"), nil},
		{"an agent's ID", BoardTaskSpec{ID: "agent-1/x", Prompt: "x"}, []string{"t.id"}},
		{"too many needs", BoardTaskSpec{ID: "a", Prompt: "x", Needs: ids(MaxBoardNeeds + 1)}, []string{"t.needs"}},
		{"bad label", BoardTaskSpec{ID: "a", Prompt: "x", Labels: []string{"GPU", "ok", "-x"}}, []string{"t.labels[0]", "t.labels[2]"}},
		{"dup label", BoardTaskSpec{ID: "a", Prompt: "x", Labels: []string{"gpu", "gpu"}}, []string{"t.labels[1]"}},
		{"too many labels", BoardTaskSpec{ID: "a", Prompt: "x", Labels: ids(MaxBoardLabels + 1)}, []string{"t.labels"}},
		{"bad assignee", BoardTaskSpec{ID: "a", Prompt: "x", Assignee: "Agent_1"}, []string{"t.assignee"}},
		{"negative attempts", BoardTaskSpec{ID: "a", Prompt: "x", Attempts: -1}, []string{"t.attempts"}},
		{"too many attempts", BoardTaskSpec{ID: "a", Prompt: "x", Attempts: MaxBoardAttempts + 1}, []string{"t.attempts"}},
		{"negative timeout", BoardTaskSpec{ID: "a", Prompt: "x", Timeout: Duration(-time.Second)}, []string{"t.timeout"}},
		{"long timeout", BoardTaskSpec{ID: "a", Prompt: "x", Timeout: Duration(25 * time.Hour)}, []string{"t.timeout"}},
		{"all at once", BoardTaskSpec{ID: "", Labels: []string{"X"}, Attempts: -2}, []string{"t.id", "t", "t.labels[0]", "t.attempts"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := fields(c.spec.Validate("t"))
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("problems in %v, want %v (%v)", got, c.want, c.spec.Validate("t"))
			}
		})
	}
}

func make65() []string {
	out := make([]string, MaxBoardRunArgs+1)
	for i := range out {
		out[i] = "a"
	}
	return out
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "x" + strings.Repeat("y", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return out
}

func TestBoardPlanValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		plan BoardPlan
		want []string
		msgs []string // each must appear in the error
	}{
		{"fine", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a"), prompt("b", "a"), prompt("c", "a", "b")}}, nil, nil},
		{"no plan id", BoardPlan{Tasks: []BoardTaskSpec{prompt("a")}}, []string{"plan"}, nil},
		{"bad plan id", BoardPlan{Plan: "my plan", Tasks: []BoardTaskSpec{prompt("a")}}, []string{"plan"}, nil},
		{"no tasks", BoardPlan{Plan: "p"}, []string{"tasks"}, nil},
		{"duplicate", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a"), prompt("b"), prompt("a")}}, []string{"tasks[2].id"}, []string{`"a" is also tasks[0]'s ID`}},
		{"unknown need", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a"), prompt("b", "a", "zz")}}, []string{"tasks[1].needs[1]"}, []string{`"zz" is not a task of the plan`}},
		{"self need", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a", "a")}}, []string{"tasks[0].needs[0]"}, nil},
		{"an agent's subtask as a need", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a", "agent-1/a")}}, []string{"tasks[0].needs[0]"}, []string{`"agent-1/a" is an agent's subtask: a plan's tasks need only tasks of the plan`}},
		{"an agent's ID in a plan", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{{ID: "agent-1/a", Prompt: "x"}}}, []string{"tasks[0].id"}, nil},
		{"cycle", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a", "b"), prompt("b", "c"), prompt("c", "a"), prompt("d", "a")}},
			[]string{"tasks[0].needs"}, []string{"a -> b -> c -> a"}},
		{"two cycles", BoardPlan{Plan: "p", Tasks: []BoardTaskSpec{prompt("a", "b"), prompt("b", "a"), prompt("x", "y"), prompt("y", "x")}},
			[]string{"tasks[0].needs", "tasks[2].needs"}, []string{"a -> b -> a", "x -> y -> x"}},
		{"every problem", BoardPlan{Plan: "p!", Tasks: []BoardTaskSpec{{ID: "a", Prompt: "x", Run: []string{"y"}}, prompt("b", "nope"), {ID: "c", Prompt: "x", Attempts: 1000}}},
			[]string{"plan", "tasks[0]", "tasks[2].attempts", "tasks[1].needs[0]"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.plan.Validate()
			got := fields(err)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("problems in %v, want %v (%v)", got, c.want, err)
			}
			for _, m := range c.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
	big := BoardPlan{Plan: "p", Tasks: make([]BoardTaskSpec, MaxBoardPlanTasks+1)}
	if got := fields(big.Validate()); len(got) != 1 || got[0] != "tasks" {
		t.Fatalf("a plan over the limit: %v", got)
	}
}

// A task's ID says who may create it, and names one file: a plan's task
// and an agent's subtask never share a key, an object name or a directory.
func TestBoardTaskNamespaces(t *testing.T) {
	for _, c := range []struct{ id, owner, file string }{
		{"build", OperatorUser, "build"},
		{"agent-1", OperatorUser, "agent-1"},
		{"agent-1/build", "agent-1", "agent-1.build"},
		{BoardAgentTaskID("agent-22", "x-1"), "agent-22", "agent-22.x-1"},
	} {
		if !ValidBoardTaskRef(c.id) || BoardTaskOwner(c.id) != c.owner || BoardTaskFile(c.id) != c.file {
			t.Errorf("%s: valid %v, owner %q, file %q; want %q, %q", c.id, ValidBoardTaskRef(c.id), BoardTaskOwner(c.id), BoardTaskFile(c.id), c.owner, c.file)
		}
	}
	// Task "agent-1"'s artifact "x/a" and task "agent-1/x"'s "a".
	if a, b := ArtifactObject("p", "agent-1", "x/a"), ArtifactObject("p", "agent-1/x", "a"); a == b {
		t.Errorf("two tasks' artifacts are one object: %s", a)
	}
	if got := BoardKeyFile("p", "agent-1/x"); got != "p.agent-1.x" || BoardKeyFile("p", "x") != "p.x" {
		t.Errorf("key files %q", got)
	}
	squat := BoardTask{Plan: "p", BoardTaskSpec: BoardTaskSpec{ID: "deploy"}, CreatedBy: "agent-1"}
	own := BoardTask{Plan: "p", BoardTaskSpec: BoardTaskSpec{ID: "agent-1/deploy"}, CreatedBy: "agent-1"}
	forged := BoardTask{Plan: "p", BoardTaskSpec: BoardTaskSpec{ID: "agent-2/deploy"}, CreatedBy: "agent-1"}
	plan := BoardTask{Plan: "p", BoardTaskSpec: BoardTaskSpec{ID: "deploy"}, CreatedBy: OperatorUser}
	if squat.ByOwner() || forged.ByOwner() || !own.ByOwner() || !plan.ByOwner() {
		t.Errorf("by owner: squat %v, forged %v, own %v, plan %v", squat.ByOwner(), forged.ByOwner(), own.ByOwner(), plan.ByOwner())
	}
}

func TestBoardResultValidate(t *testing.T) {
	code := 2
	ok := BoardResult{Summary: "built", Artifacts: []string{"report.md", "out/bin-1.tar.gz"}, ExitCode: &code}
	if err := ok.Validate("result"); err != nil {
		t.Fatal(err)
	}
	bad := BoardResult{
		Summary:   strings.Repeat("s", MaxBoardSummary+1),
		Artifacts: []string{"../etc/passwd", "/abs", "a//b", "ok", "a/./b", strings.Repeat("a", MaxBoardArtifactRef+1)},
	}
	want := "result.summary,result.artifacts[0],result.artifacts[1],result.artifacts[2],result.artifacts[4],result.artifacts[5]"
	if got := strings.Join(fields(bad.Validate("result")), ","); got != want {
		t.Fatalf("problems in %s, want %s", got, want)
	}
	many := BoardResult{Artifacts: make([]string, MaxBoardArtifacts+1)}
	for i := range many.Artifacts {
		many.Artifacts[i] = "a"
	}
	if got := fields(many.Validate("r")); len(got) != 1 || got[0] != "r.artifacts" {
		t.Fatalf("too many artifacts: %v", got)
	}
	if CheckBoardReason("reason", strings.Repeat("r", MaxBoardReason+1)) == nil || CheckBoardReason("reason", "fine") != nil {
		t.Fatal("reason bound")
	}
}
