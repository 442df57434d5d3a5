// Package arch_test holds the project's map: which of its packages each
// package may import, checked against `go list -deps -json` so that a
// forbidden edge fails `go test ./...`.
package arch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/ai-flock/ai-flock"

// allowed is the map: for every package of the module (by its path inside
// the module, "" for the root), the packages of the module its non-test
// code may import. The layers it keeps:
//
//   - protocol imports nothing of ours but its own sub-packages: it is the
//     contract both sides share; its sub-packages import nothing of ours;
//   - the agent side (agent/...) imports protocol and agent/... only, never
//     infra or stacks: the runtime does not know how it is deployed;
//   - infra/... imports protocol and infra/... only, never stacks or agent;
//   - stacks imports infra/... and protocol; the root main imports stacks;
//   - tests/... are test kits and test programs: they may import anything.
//
// A package missing here fails the test: a new package takes its place in
// the map when it is made.
var allowed = map[string][]string{
	"": {"stacks"},

	"protocol":          {"protocol/egress"},
	"protocol/egress":   {},
	"protocol/egressca": {},

	"agent/audit":                {"agent/pace", "protocol"},
	"agent/board":                {"agent/kvwatch", "agent/pace", "protocol"},
	"agent/bus":                  {"agent/pace", "protocol"},
	"agent/cabundle":             {},
	"agent/cli":                  {"agent/audit", "agent/board", "agent/cabundle", "agent/ledger", "agent/logbound", "agent/mailbox", "agent/mcpserver", "agent/operator", "agent/pid1", "agent/tool", "agent/top", "agent/worker", "protocol", "protocol/egress"},
	"agent/cmd/flock-agent":      {"agent/cli", "agent/cmd/internal/command"},
	"agent/cmd/flock-bus":        {"agent/bus", "agent/cmd/internal/command", "protocol"},
	"agent/cmd/flock-services":   {"agent/cmd/internal/command", "agent/services", "protocol"},
	"agent/cmd/flock-gateway":    {"agent/cmd/internal/command", "agent/gateway/service", "protocol"},
	"agent/cmd/internal/command": {},
	"agent/gateway":              {"agent/gateway/broker", "agent/ledger", "protocol"},
	"agent/gateway/broker":       {"agent/gateway/netguard", "agent/ledger", "protocol", "protocol/egress", "protocol/egressca"},
	"agent/gateway/netguard":     {},
	"agent/gateway/service":      {"agent/gateway", "agent/gateway/broker", "agent/gateway/netguard", "agent/ledger", "agent/tracing", "protocol", "protocol/egress", "protocol/egressca"},
	"agent/ledger":               {"protocol"},
	"agent/logbound":             {},
	"agent/pid1":                 {"agent/logbound"},
	"agent/kvwatch":              {},
	"agent/logfile":              {},
	"agent/mailbox":              {"protocol"},
	"agent/metrics":              {"protocol"},
	"agent/mcpserver":            {"agent/board", "agent/mailbox", "agent/operator", "agent/roster", "agent/worker", "protocol"},
	"agent/pace":                 {},
	"agent/operator":             {"agent/kvwatch", "agent/ledger", "agent/mailbox", "agent/roster", "protocol"},
	"agent/roster":               {"protocol"},
	"agent/tool":                 {},
	"agent/top":                  {"agent/board", "agent/operator", "agent/roster", "protocol"},
	"agent/services":             {"agent/audit", "agent/board", "agent/kvwatch", "agent/metrics", "agent/pace", "agent/tracing", "protocol"},
	"agent/worker":               {"agent/board", "agent/logfile", "agent/pace", "protocol"},
	"agent/tracing":              {"protocol"},

	"infra/awsflock":                       {"infra/awsrules", "infra/dnsfirewall", "infra/flock", "infra/gatewayconfig", "protocol"},
	"infra/awsrules":                       {},
	"infra/dnsfirewall":                    {},
	"infra/awsverify":                      {},
	"infra/awsverify/cmd/flock-aws-verify": {"infra/awsverify"},
	"infra/busconfig":                      {"infra/flock", "protocol"},
	"infra/credentials":                    {},
	"infra/dockerflock":                    {"infra/flock", "infra/gatewayconfig", "protocol"},
	"infra/flock":                          {"protocol", "protocol/egress"},
	"infra/gatewayconfig":                  {"infra/flock", "protocol", "protocol/egress"},
	"infra/policy":                         {"infra/policy/pack"},
	"infra/policy/pack":                    {"infra/policy/rules"},
	"infra/policy/rules":                   {"infra/awsrules", "infra/dnsfirewall", "protocol", "protocol/egress"},

	"stacks": {"infra/awsflock", "infra/busconfig", "infra/credentials", "infra/dockerflock", "infra/flock", "protocol", "protocol/egressca"},

	"examples/ai-agent": {"agent/board", "agent/pace", "protocol"},
}

// side is the layer a package belongs to, for the rules its tests keep.
func side(p string) string {
	switch {
	case p == "", p == "stacks":
		return "stacks"
	case p == "protocol":
		return "protocol"
	case strings.HasPrefix(p, "tests/"):
		return "tests"
	case strings.HasPrefix(p, "examples/"):
		return "agent" // an agent program: it runs beside the runtime
	}
	return strings.SplitN(p, "/", 2)[0] // agent, infra
}

// testMayImport is what a package's tests may import besides what its code
// may: test kits (tests/...), its own side, and for the agent side the
// flock's model (infra/flock) to describe a test bus. Never the stacks.
func testMayImport(pkg, imp string) bool {
	switch side(pkg) {
	case "tests", "stacks":
		return true
	case "protocol":
		return false
	}
	s := side(imp)
	return s == "tests" || s == "protocol" || s == side(pkg) || side(pkg) == "agent" && imp == "infra/flock"
}

type listed struct {
	ImportPath   string
	Module       *struct{ Path string }
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// check returns every forbidden edge among pkgs, one line each.
func check(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		name, ok := ours(p.ImportPath)
		if !ok {
			continue
		}
		if side(name) == "tests" {
			continue
		}
		may, known := allowed[name]
		if !known {
			bad = append(bad, fmt.Sprintf("%s: not in the map (tests/arch/arch_test.go): say what it may import", p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			if i, ok := ours(imp); ok && !contains(may, i) {
				bad = append(bad, fmt.Sprintf("%s imports %s: not an allowed edge (allowed: %s)", display(name), display(i), strings.Join(may, ", ")))
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if i, ok := ours(imp); ok && i != name && !contains(may, i) && !testMayImport(name, i) {
				bad = append(bad, fmt.Sprintf("%s's tests import %s: across a layer (%s tests may use test kits and their own side)", display(name), display(i), side(name)))
			}
		}
	}
	sort.Strings(bad)
	return slicesCompact(bad)
}

func ours(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(importPath, module+"/")
	return rest, ok
}

func display(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func slicesCompact(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// goList runs go list -deps -json over the whole module (tests included).
func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-test", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// -test adds test variants ("p [p.test]") and test mains ("p.test"):
		// the plain package carries the test imports already.
		if strings.Contains(p.ImportPath, " ") || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportsFollowTheMap(t *testing.T) {
	pkgs := goList(t)
	n := 0
	for _, p := range pkgs {
		if _, ok := ours(p.ImportPath); ok {
			n++
		}
	}
	if n < len(allowed) {
		t.Fatalf("go list found %d of the module's packages, the map names %d", n, len(allowed))
	}
	if bad := check(pkgs); len(bad) > 0 {
		t.Fatalf("%d forbidden import(s):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	// Every package the map names still exists (a stale map hides nothing,
	// but it lies about the layout).
	seen := map[string]bool{}
	for _, p := range pkgs {
		if name, ok := ours(p.ImportPath); ok {
			seen[name] = true
		}
	}
	for name := range allowed {
		if !seen[name] {
			t.Errorf("the map names %s, which is no longer a package", path.Join(module, name))
		}
	}
}

// The checker itself catches each kind of wrong edge.
func TestCheckerRefusesForbiddenEdges(t *testing.T) {
	pkg := func(name string, imports, testImports []string) listed {
		full := func(l []string) []string {
			var out []string
			for _, s := range l {
				out = append(out, path.Join(module, s))
			}
			return out
		}
		return listed{ImportPath: path.Join(module, name), Imports: full(imports), XTestImports: full(testImports)}
	}
	for _, c := range []struct {
		name string
		pkg  listed
		want string
	}{
		{"agent side imports infra", pkg("agent/worker", []string{"protocol", "infra/flock"}, nil), "agent/worker imports infra/flock"},
		{"infra imports stacks", pkg("infra/busconfig", []string{"stacks"}, nil), "infra/busconfig imports stacks"},
		{"protocol imports ours", pkg("protocol", []string{"agent/ledger"}, nil), "protocol imports agent/ledger"},
		{"a component beyond its list", pkg("infra/dockerflock", []string{"infra/awsflock"}, nil), "infra/dockerflock imports infra/awsflock"},
		{"agent tests import the stacks", pkg("agent/bus", nil, []string{"stacks"}), "agent/bus's tests import stacks"},
		{"a package not in the map", pkg("agent/newthing", nil, nil), "agent/newthing: not in the map"},
	} {
		bad := check([]listed{c.pkg})
		if len(bad) != 1 || !strings.Contains(bad[0], c.want) {
			t.Errorf("%s: got %q, want one line containing %q", c.name, bad, c.want)
		}
	}
	// And lets the allowed ones through.
	if bad := check([]listed{pkg("agent/worker", []string{"protocol", "agent/logfile"}, []string{"tests/bustest", "infra/flock", "agent/operator"})}); len(bad) != 0 {
		t.Errorf("allowed edges refused: %q", bad)
	}
}
