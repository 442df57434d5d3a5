package policy_test

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/policy/rules"
)

// TestEachPolicyFires: for every policy, fixtures that break exactly its rule
// make the whole pack report that policy and no other, with a message that
// names the rule, the resource and the fix.
func TestEachPolicyFires(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range breakCases() {
		covered[c.policy] = true
		t.Run(c.name(), func(t *testing.T) {
			vs := check(c.stack, c.build(t))
			if got := policyNames(vs); len(got) != 1 || got[0] != c.policy {
				t.Fatalf("policies reporting: %v, want exactly [%s]:%s", got, c.policy, messages(vs))
			}
			var hit *rules.Violation
			for i, v := range vs {
				if v.Name == c.resource && strings.Contains(v.Message(), c.want) {
					hit = &vs[i]
				}
			}
			if hit == nil {
				t.Fatalf("no violation of %s on %q saying %q:%s", c.policy, c.resource, c.want, messages(vs))
			}
			msg := hit.Message()
			for _, part := range []string{"[" + c.policy + "]", `"` + c.resource + `"`, ". Fix: "} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q lacks %q", msg, part)
				}
			}
			if hit.URN == "" || !strings.HasSuffix(hit.URN, "::"+c.resource) {
				t.Errorf("violation URN %q does not name %s", hit.URN, c.resource)
			}
			if strings.Contains(msg, testSeed) || strings.Contains(msg, "hunter2") {
				t.Errorf("the message repeats a secret value: %q", msg)
			}
		})
	}
	for _, p := range rules.All() {
		if !covered[p.Name] {
			t.Errorf("policy %s has no breaking fixture in breakCases", p.Name)
		}
	}
}
