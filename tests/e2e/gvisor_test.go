package e2e

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// gVisor: FLOCK_E2E_RUNTIME=runsc (make e2e-gvisor) runs this suite on a
// flock under runsc. The probes that must hold under gVisor too (isolation,
// limits, hostile agents in their containers) run there as under runc; a
// test that is not one of them says so as its first statement, with
// skipUnderGVisor and why. Without runsc on the engine the suite skips,
// unless FLOCK_REQUIRE_GVISOR=1, which turns that into a failure.

// Why the tests that do not run under gVisor do not.
const (
	// The flock's own function (restarts, redelivery, the README's
	// commands): gVisor changes the sandbox, not what these check.
	notTheSandbox = "it checks the flock's function, not the sandbox: the runc run covers it"
	// The gateway's function, from an agent: the same.
	gatewayFunction = "it checks the gateway's function, not the sandbox: the runc run covers it"
	// A limit the bus or the gateway keeps on its side, outside the sandbox.
	limitOutsideTheSandbox = "the limit it checks is kept by the bus or the gateway, outside the sandbox: the runc run covers it"
)

// underGVisor reports whether the suite runs its flock under gVisor.
func underGVisor() bool { return os.Getenv("FLOCK_E2E_RUNTIME") == "runsc" }

// skipUnderGVisor skips a test that is not one of the gVisor probes when
// the flock runs under runsc. It must be the test's first statement
// (TestGVisorMarkersComeFirst): such a test does nothing under gVisor.
func skipUnderGVisor(t *testing.T, why string) {
	t.Helper()
	if underGVisor() {
		t.Skip("not run under gVisor: " + why)
	}
}

// gvisorMissing says why the engine cannot run a flock under runsc, or ""
// when it can: the engine must have the runtime runsc registered.
func gvisorMissing(ctx context.Context, engine *replay.Engine) string {
	has, err := engine.HasRuntime(ctx, "runsc")
	if err != nil {
		return "the engine's runtimes cannot be read: " + err.Error()
	}
	if has {
		return ""
	}
	why := "the Docker engine has no runtime runsc registered"
	if _, err := exec.LookPath("runsc"); err != nil {
		why += " and runsc is not installed"
	}
	return why + " (tests/setup.sh installs and registers it)"
}

// Every test that carries the marker calls it first, with a reason: under
// gVisor it then does nothing, so the tests that run there are exactly
// the unmarked ones (logged).
func TestGVisorMarkersComeFirst(t *testing.T) {
	skipUnderGVisor(t, "a check of this package's source: the runc run covers it")
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var probes []string
	for _, name := range files {
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			calls := 0
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if isMarker(n) {
					calls++
				}
				return true
			})
			first := len(fn.Body.List) > 0 && isMarkerStmt(fn.Body.List[0])
			switch {
			case calls == 0:
				probes = append(probes, fn.Name.Name)
			case calls > 1 || !first:
				t.Errorf("%s: %s calls skipUnderGVisor other than once as its first statement", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	sort.Strings(probes)
	t.Logf("under gVisor: %d tests: %s", len(probes), strings.Join(probes, " "))
}

func isMarkerStmt(s ast.Stmt) bool {
	e, ok := s.(*ast.ExprStmt)
	if !ok || !isMarker(e.X) {
		return false
	}
	why := e.X.(*ast.CallExpr).Args[1]
	if lit, ok := why.(*ast.BasicLit); ok {
		return lit.Kind == token.STRING && len(lit.Value) > 2
	}
	_, named := why.(*ast.Ident)
	return named
}

func isMarker(n ast.Node) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == "skipUnderGVisor" && len(call.Args) == 2
}
