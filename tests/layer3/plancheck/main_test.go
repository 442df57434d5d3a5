package main

import (
	"os"
	"strings"
	"testing"
)

func withStdin(t *testing.T, data string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "preview")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = old; f.Close() })
}

const urn = "urn:pulumi:dev::ai-flock::flock:docker:Flock$docker:index/container:Container::"

func TestPlanCheck(t *testing.T) {
	cases := []struct {
		name, steps, wantErr string
	}{
		{"only the new agent", `{"op":"same","urn":"` + urn + `flock-bus"},{"op":"create","urn":"` + urn + `flock-agent-4"},{"op":"create","urn":"` + urn + `flock-agent-4-net"},{"op":"update","urn":"` + urn + `flock-bus-config"}`, ""},
		{"bus replaced", `{"op":"create","urn":"` + urn + `flock-agent-4"},{"op":"replace","urn":"` + urn + `flock-bus","diffReasons":["cpus"]}`, "replace flock-bus (cpus)"},
		{"another agent updated", `{"op":"create","urn":"` + urn + `flock-agent-4"},{"op":"update","urn":"` + urn + `flock-agent-1"}`, "updates flock-agent-1"},
		{"agent-40 is not agent-4", `{"op":"create","urn":"` + urn + `flock-agent-40"},{"op":"create","urn":"` + urn + `flock-agent-4"}`, "creates flock-agent-40"},
		{"nothing created", `{"op":"same","urn":"` + urn + `flock-bus"}`, "creates nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withStdin(t, `{"steps":[`+tc.steps+`]}`)
			err := check("flock", "agent-4")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("rejected a plan that adds only agent-4: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}
