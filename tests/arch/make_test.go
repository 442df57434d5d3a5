package arch_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Every target of the Makefile says what it does, and `make help` lists it.
func TestEveryMakeTargetIsInHelp(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed: it is how the project is run")
	}
	raw, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := regexp.MustCompile(`(?m)^([a-z0-9][a-z0-9-]*):`).FindAllStringSubmatch(string(raw), -1)
	if len(targets) < 10 {
		t.Fatalf("found %d targets in the Makefile", len(targets))
	}
	cmd := exec.Command("make", "--no-print-directory", "help")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	for _, m := range targets {
		if !strings.Contains("\n"+string(out), "\n"+m[1]+": ") {
			t.Errorf("make help does not list %q: give it a `## %s: what it does` comment", m[1], m[1])
		}
	}
}
