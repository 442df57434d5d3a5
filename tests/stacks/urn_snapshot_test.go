package stacks_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestURNSnapshot pins every resource both stacks declare: its type token,
// logical name and parent chain, as the engine builds its URN. A refactoring
// that changes one would replace the resource on the next `pulumi up`; the
// golden file is rewritten (go test ./tests/stacks -run TestURNSnapshot
// -update) only for a change meant to do that.
func TestURNSnapshot(t *testing.T) {
	for _, tc := range []struct {
		stack string
		cfg   capture.Config
	}{
		{"dev", capture.Config{"flock:agentCount": "4", "flock:bus": `{"replicas": 3}`}},
		{"aws", capture.Config{"flock:agentCount": "4", "flock:bus": `{"replicas": 3}`}},
	} {
		t.Run(tc.stack, func(t *testing.T) {
			s, err := capture.RunStack(tc.stack, withGateway(tc.cfg, ""), "flock:anthropicApiKey")
			if err != nil {
				t.Fatalf("%s stack: %v", tc.stack, err)
			}
			got := strings.Join(urns(tc.stack, s), "\n") + "\n"
			golden := filepath.Join("testdata", "urns-"+tc.stack+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (write it with: go test ./tests/stacks -run TestURNSnapshot -update)", err)
			}
			if got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for _, l := range wl {
					if l != "" && !slices.Contains(gl, l) {
						t.Errorf("gone:  %s", l)
					}
				}
				for _, l := range gl {
					if l != "" && !slices.Contains(wl, l) {
						t.Errorf("new:   %s", l)
					}
				}
				t.Errorf("%s: the URNs differ from %s (a change meant to replace resources rewrites it with -update)", tc.stack, golden)
			}
		})
	}
}

// urns are the sorted URNs of every resource s declared, each with its
// parents' types before its own, as the engine builds them (the mock engine
// leaves the parent types out; the stack's own type is never in them).
func urns(stack string, s *capture.Stack) []string {
	byURN := map[string]capture.Resource{}
	for _, r := range s.Resources {
		byURN["urn:pulumi:"+stack+"::ai-flock::"+r.Type+"::"+r.Name] = r
	}
	var qualified func(r capture.Resource) string
	qualified = func(r capture.Resource) string {
		p, ok := byURN[r.Parent]
		switch {
		case r.Parent == "" || string(resource.URN(r.Parent).Type()) == capture.TypeStack:
			return r.Type
		case !ok:
			return "unknown-parent(" + r.Parent + ")$" + r.Type
		case p.Type == capture.TypeStack:
			return r.Type
		}
		return qualified(p) + "$" + r.Type
	}
	var out []string
	for _, r := range s.Resources {
		out = append(out, "urn:pulumi:"+stack+"::ai-flock::"+qualified(r)+"::"+r.Name)
	}
	slices.Sort(out)
	return out
}
