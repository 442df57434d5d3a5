// Package policy_test proves the policy pack (infra/policy): it passes both
// stacks as declared under the mock engine, each policy fires on a fixture
// that breaks exactly its rule, no policy is missing from the pack, and the
// policyx wiring (down to the analyzer's gRPC server) delivers violations.
package policy_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/tokens"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/policy/pack"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// urnOf is the URN the engine gives a captured resource.
func urnOf(stack string, r capture.Resource) string {
	parentType := tokens.Type("")
	if r.Parent != "" {
		parentType = resource.URN(r.Parent).QualifiedType()
	}
	return string(resource.NewURN(tokens.QName(stack), "ai-flock", parentType, tokens.Type(r.Type), r.Name))
}

// toRules is what the pack sees of captured resources: the engine's view
// (analyzerResources) through the conversion the pack applies to it.
func toRules(stack string, rs []capture.Resource) []rules.Resource {
	out := make([]rules.Resource, 0, len(rs))
	for _, r := range analyzerResources(stack, rs) {
		out = append(out, pack.FromAnalyzer(r))
	}
	return out
}

var (
	devMu       sync.Mutex
	devCaptures = map[int]*capture.Stack{} // by agent count
)

// dev captures the dev stack with n agents (cached: captures are read-only here).
func dev(t testing.TB, n int) []capture.Resource {
	t.Helper()
	devMu.Lock()
	defer devMu.Unlock()
	if s, ok := devCaptures[n]; ok {
		return clone(s.Resources)
	}
	var overrides capture.Config
	if n != 3 { // 3 is what Pulumi.dev.yaml declares
		overrides = capture.Config{"flock:agentCount": fmt.Sprint(n)}
	}
	s, err := capture.RunDev(overrides)
	if err != nil {
		t.Fatalf("dev stack with %d agents: %v", n, err)
	}
	devCaptures[n] = s
	return clone(s.Resources)
}

// clone copies resources deeply enough for a test to mutate one.
func clone(rs []capture.Resource) []capture.Resource {
	out := make([]capture.Resource, len(rs))
	for i, r := range rs {
		r.Inputs = deepCopy(resource.NewObjectProperty(r.Inputs)).ObjectValue()
		r.Deps = append([]string(nil), r.Deps...)
		out[i] = r
	}
	return out
}

// deepCopy copies v with its nested arrays and objects: a test that edits a
// nested value in place (previewOfNewStack) must not reach the cached capture.
func deepCopy(v resource.PropertyValue) resource.PropertyValue {
	switch {
	case v.IsObject():
		m := resource.PropertyMap{}
		for k, e := range v.ObjectValue() {
			m[k] = deepCopy(e)
		}
		return resource.NewObjectProperty(m)
	case v.IsArray():
		a := make([]resource.PropertyValue, len(v.ArrayValue()))
		for i, e := range v.ArrayValue() {
			a[i] = deepCopy(e)
		}
		return resource.NewArrayProperty(a)
	}
	return v
}

// find returns the index of the resource of type t named name.
func find(t testing.TB, rs []capture.Resource, typ, name string) int {
	t.Helper()
	for i, r := range rs {
		if r.Type == typ && r.Name == name {
			return i
		}
	}
	t.Fatalf("no %s named %q", typ, name)
	return -1
}

// edit changes the inputs of one resource as plain Go values.
func edit(t testing.TB, rs []capture.Resource, typ, name string, f func(in map[string]any)) []capture.Resource {
	t.Helper()
	i := find(t, rs, typ, name)
	in := rs[i].Inputs.Mappable()
	f(in)
	rs[i].Inputs = resource.NewPropertyMapFromMap(in)
	return rs
}

// remove drops one resource.
func remove(t testing.TB, rs []capture.Resource, typ, name string) []capture.Resource {
	t.Helper()
	i := find(t, rs, typ, name)
	return append(rs[:i:i], rs[i+1:]...)
}

// editContainerDefs changes a task definition's containerDefinitions JSON.
func editContainerDefs(t testing.TB, rs []capture.Resource, name string, f func(defs []map[string]any)) []capture.Resource {
	t.Helper()
	return edit(t, rs, awsrules.TypeTaskDefinition, name, func(in map[string]any) {
		var defs []map[string]any
		if err := json.Unmarshal([]byte(in["containerDefinitions"].(string)), &defs); err != nil {
			t.Fatalf("%s: containerDefinitions: %v", name, err)
		}
		f(defs)
		b, err := json.Marshal(defs)
		if err != nil {
			t.Fatal(err)
		}
		in["containerDefinitions"] = string(b)
	})
}

// check runs the whole pack over a stack.
func check(stack string, rs []capture.Resource) []rules.Violation {
	return rules.Check(toRules(stack, rs))
}

func messages(vs []rules.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("\n  " + v.Message())
	}
	return b.String()
}

func policyNames(vs []rules.Violation) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v.Policy] {
			seen[v.Policy] = true
			out = append(out, v.Policy)
		}
	}
	sort.Strings(out)
	return out
}

// obj and list walk plain inputs.
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

var (
	gwMu      sync.Mutex
	gwCapture *capture.Stack
)

// devGateway is the dev stack as declared with a gateway (the anthropic
// upstream, its key as a secret), captured once.
func devGateway(t testing.TB) []capture.Resource {
	t.Helper()
	gwMu.Lock()
	defer gwMu.Unlock()
	if gwCapture == nil {
		var err error
		if gwCapture, err = capture.RunStack("dev", capture.Config{
			"flock:gateway":         `{"upstreams": {"anthropic": {}}, "budgetTokens": 100000}`,
			"flock:anthropicApiKey": "sk-ant-policy-test-key",
		}, "flock:anthropicApiKey"); err != nil {
			t.Fatalf("dev stack with a gateway: %v", err)
		}
	}
	return clone(gwCapture.Resources)
}
