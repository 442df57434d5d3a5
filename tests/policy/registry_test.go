package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/policyx"

	"github.com/ai-flock/ai-flock/infra/policy/pack"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// TestNoRuleMissingFromRegistry reads the rules package's source: every
// function shaped like a rule (func(Resource) []Finding or
// func([]Resource) []Finding) must be the check of a policy in All(), and
// All() must refer to nothing else. A rule written but never registered is
// never served; this test is what notices.
func TestNoRuleMissingFromRegistry(t *testing.T) {
	dir := capture.ProjectFile(t, "infra", "policy", "rules")
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "rules" {
			t.Fatalf("%s: package %s, want rules", p, f.Name.Name)
		}
		files = append(files, f)
	}
	ruleFuncs := map[string]string{} // name -> file:line
	var registry *ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			if fn.Name.Name == "All" {
				registry = fn
			}
			if isRuleSignature(fn.Type) {
				ruleFuncs[fn.Name.Name] = fset.Position(fn.Pos()).String()
			}
		}
	}
	if registry == nil {
		t.Fatal("no func All in the rules package")
	}
	if len(ruleFuncs) < len(rules.All()) {
		t.Fatalf("found %d rule functions but All() has %d policies: the signature this test looks for is stale", len(ruleFuncs), len(rules.All()))
	}
	registered := map[string]int{}
	ast.Inspect(registry.Body, func(n ast.Node) bool {
		kv, ok := n.(*ast.KeyValueExpr)
		if !ok {
			return true
		}
		if key, ok := kv.Key.(*ast.Ident); ok && (key.Name == "Resource" || key.Name == "Stack") {
			id, ok := kv.Value.(*ast.Ident)
			if !ok {
				t.Errorf("%s: the %s of a policy must name a rule function, not %s", fset.Position(kv.Pos()), key.Name, types.ExprString(kv.Value))
				return true
			}
			registered[id.Name]++
		}
		return true
	})
	for _, name := range sortedNames(ruleFuncs) {
		if registered[name] == 0 {
			t.Errorf("%s: rule %s is not in the registry (rules.All), so the pack does not serve it", ruleFuncs[name], name)
		}
	}
	for name, n := range registered {
		if _, ok := ruleFuncs[name]; !ok {
			t.Errorf("the registry refers to %s, which is not a rule function of the package", name)
		}
		if n > 1 {
			t.Errorf("rule %s backs %d policies", name, n)
		}
	}
}

func isRuleSignature(ft *ast.FuncType) bool {
	if ft.Params == nil || ft.Results == nil || len(ft.Params.List) != 1 || len(ft.Results.List) != 1 || len(ft.Params.List[0].Names) > 1 {
		return false
	}
	in, out := types.ExprString(ft.Params.List[0].Type), types.ExprString(ft.Results.List[0].Type)
	return (in == "Resource" || in == "[]Resource") && out == "[]Finding"
}

func sortedNames(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var policyName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)+$`)

// TestRegistryEntries: each policy has a unique name, a description, an
// explicit enforcement level, and exactly one kind of check.
func TestRegistryEntries(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range rules.All() {
		if !policyName.MatchString(p.Name) || seen[p.Name] {
			t.Errorf("policy name %q: must be unique kebab-case", p.Name)
		}
		seen[p.Name] = true
		if p.Level != rules.Mandatory && p.Level != rules.Advisory {
			t.Errorf("%s: enforcement level %v: set it explicitly (policyx reads unset as advisory)", p.Name, p.Level)
		}
		if len(p.Description) < 20 {
			t.Errorf("%s: describe what the policy protects against", p.Name)
		}
		switch {
		case p.Resource != nil && p.Stack == nil:
			if len(p.Types) == 0 {
				t.Errorf("%s: a resource policy names the types it checks", p.Name)
			}
		case p.Stack != nil && p.Resource == nil:
			if len(p.Types) != 0 {
				t.Errorf("%s: a stack policy sees every resource; Types %v would be ignored", p.Name, p.Types)
			}
		default:
			t.Errorf("%s: set exactly one of Resource or Stack", p.Name)
		}
	}
}

// TestPackServesEveryPolicy: the policyx pack holds one policy per registry
// entry, with its name, description, kind and enforcement level.
func TestPackServesEveryPolicy(t *testing.T) {
	pp, err := pack.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp.Name() != pack.Name || pp.Version().String() != pack.Version {
		t.Errorf("pack %s %s, want %s %s", pp.Name(), pp.Version(), pack.Name, pack.Version)
	}
	served := map[string]policyx.Policy{}
	for _, p := range pp.Policies() {
		served[p.Name()] = p
	}
	all := rules.All()
	if len(pp.Policies()) != len(all) || len(served) != len(all) {
		t.Errorf("the pack serves %d policies (%d names), the registry has %d", len(pp.Policies()), len(served), len(all))
	}
	for _, want := range all {
		p, ok := served[want.Name]
		if !ok {
			t.Errorf("the pack does not serve %s", want.Name)
			continue
		}
		level, err := pack.Level(want.Level)
		if err != nil || p.EnforcementLevel() != level {
			t.Errorf("%s: served at level %v, registry says %v (%v)", want.Name, p.EnforcementLevel(), want.Level, err)
		}
		if p.Description() != want.Description {
			t.Errorf("%s: served description %q", want.Name, p.Description())
		}
		_, isResource := p.(policyx.ResourceValidationPolicy)
		_, isStack := p.(policyx.StackValidationPolicy)
		if isResource != (want.Resource != nil) || isStack != (want.Stack != nil) {
			t.Errorf("%s: served as resource=%v stack=%v", want.Name, isResource, isStack)
		}
	}
	if _, err := pack.Level(rules.Level(0)); err == nil {
		t.Error("an unset enforcement level must not map to a policyx level")
	}
}

// TestPolicyPackProject: PulumiPolicy.yaml is what the CLI expects of a Go pack.
func TestPolicyPackProject(t *testing.T) {
	proj, err := workspace.LoadPolicyPack(capture.ProjectFile(t, "infra", "policy", "PulumiPolicy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if proj.Runtime.Name() != "go" {
		t.Errorf("runtime %q, want go", proj.Runtime.Name())
	}
	if proj.Main != "" {
		t.Errorf("main %q: the Go language host builds the pack's own directory", proj.Main)
	}
	if _, err := os.Stat(capture.ProjectFile(t, "infra", "policy", "main.go")); err != nil {
		t.Errorf("the Go language host runs `go build` in infra/policy: %v", err)
	}
}

// TestSharedConstants: the rules read the labels and ports the stacks set.
func TestSharedConstants(t *testing.T) {
	for _, c := range []struct{ rules, stack string }{
		{protocol.LabelFlock, protocol.LabelFlock},
		{protocol.LabelRole, protocol.LabelRole},
		{protocol.LabelAgent, protocol.LabelAgent},
		{rules.TypeContainer, capture.TypeContainer},
		{rules.TypeNetwork, capture.TypeNetwork},
		{rules.TypeCommand, capture.TypeCommand},
	} {
		if c.rules != c.stack {
			t.Errorf("rules use %q where the stacks use %q", c.rules, c.stack)
		}
	}
	if protocol.ClientPort != 4222 || protocol.MonitorPort != 8222 {
		t.Errorf("bus ports changed (%d, %d): update container-published-ports' description and fix text", protocol.ClientPort, protocol.MonitorPort)
	}
	if protocol.RoutePort != 6222 {
		t.Errorf("the route port changed (%d): update stack-bus-routes-self-only's description", protocol.RoutePort)
	}
}

// TestReadmeListsEveryPolicy: the README's table (infra/policy/README.md)
// has a row for every policy, with its level, and no row for a policy that
// does not exist.
func TestReadmeListsEveryPolicy(t *testing.T) {
	raw, err := os.ReadFile(capture.ProjectFile(t, "infra", "policy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\| (mandatory|advisory) \\|")
	rows := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		rows[m[1]] = m[2]
	}
	known := map[string]bool{}
	for _, p := range rules.All() {
		known[p.Name] = true
		if rows[p.Name] != p.Level.String() {
			t.Errorf("README: policy %s is listed as %q, want a row with level %s", p.Name, rows[p.Name], p.Level)
		}
	}
	for name := range rows {
		if !known[name] {
			t.Errorf("README lists %s, which is no policy of the pack", name)
		}
	}
}
