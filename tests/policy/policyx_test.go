package policy_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"

	"github.com/ai-flock/ai-flock/infra/policy/pack"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// recorder is a policyx.PolicyManager that keeps what policies report.
type recorder struct {
	policy string
	got    []report
}

type report struct{ policy, message, urn string }

func (r *recorder) ReportViolation(message, urn string) {
	r.got = append(r.got, report{r.policy, message, urn})
}

// analyzerResources is what the engine hands a policy: policyx's view of
// each resource, with properties as property.Map.
func analyzerResources(stack string, rs []capture.Resource) []policyx.AnalyzerResource {
	out := make([]policyx.AnalyzerResource, 0, len(rs))
	for _, r := range rs {
		out = append(out, policyx.AnalyzerResource{
			Type:         r.Type,
			Name:         r.Name,
			URN:          urnOf(stack, r),
			Parent:       r.Parent,
			Properties:   resource.FromResourcePropertyMap(r.Inputs),
			Dependencies: r.Deps,
		})
	}
	return out
}

// runPack calls every policy the pack serves the way policyx's analyzer
// server does: each resource policy's Validate on each resource, each stack
// policy's Validate on the whole stack.
func runPack(t testing.TB, stack string, rs []capture.Resource) []report {
	t.Helper()
	pp, err := pack.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resources := analyzerResources(stack, rs)
	rec := &recorder{}
	for _, p := range pp.Policies() {
		rec.policy = p.Name()
		switch p := p.(type) {
		case policyx.ResourceValidationPolicy:
			for _, r := range resources {
				if err := p.Validate(ctx, policyx.ResourceValidationArgs{Manager: rec, Resource: r}); err != nil {
					t.Fatalf("%s on %s: %v", p.Name(), r.URN, err)
				}
			}
		case policyx.StackValidationPolicy:
			if err := p.Validate(ctx, policyx.StackValidationArgs{Manager: rec, Resources: resources}); err != nil {
				t.Fatalf("%s: %v", p.Name(), err)
			}
		default:
			t.Fatalf("%s is a %T, neither a resource nor a stack validation policy", p.Name(), p)
		}
	}
	return rec.got
}

// TestPolicyxWiringClean: through the policies the pack registers with
// policyx, both stacks report nothing.
func TestPolicyxWiringClean(t *testing.T) {
	for _, s := range []struct {
		stack string
		rs    []capture.Resource
	}{{"dev", dev(t, 3)}, {"aws", awsStack(3)}, {"aws", awsCapture(t, 3)}} {
		if got := runPack(t, s.stack, s.rs); len(got) > 0 {
			t.Errorf("%s: the served pack reports %v", s.stack, got)
		}
	}
}

// TestPolicyxWiringReports: for every breaking fixture, what the served
// policies report to the PolicyManager is exactly what the rules find: the
// same policy, the same messages, the offending resource's URN.
func TestPolicyxWiringReports(t *testing.T) {
	for _, c := range breakCases() {
		t.Run(c.name(), func(t *testing.T) {
			rs := c.build(t)
			var want []string
			for _, v := range check(c.stack, rs) {
				want = append(want, v.Policy+" "+v.URN+" "+v.Message())
			}
			var got []string
			for _, r := range runPack(t, c.stack, rs) {
				got = append(got, r.policy+" "+r.urn+" "+r.message)
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("reported through policyx:\n  %s\nthe rules find:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if len(got) == 0 || !strings.HasPrefix(got[0], c.policy+" ") {
				t.Errorf("nothing of %s reached the policy manager", c.policy)
			}
		})
	}
}
