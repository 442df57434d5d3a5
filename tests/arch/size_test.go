package arch_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a Go file of the project holds outside its
// tests: past it a file holds more than one concept, and a newcomer reads
// it as several.
const maxLines = 400

// No Go file tracked by git, tests aside, is over maxLines (test helpers
// under tests/ included).
func TestNoGoFileOverMaxLines(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 100 {
		t.Fatalf("git lists %d Go files: not this project's tree", len(files))
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed, deleted in the working tree
		}
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, over %d: split it by concept", f, n, maxLines)
		}
	}
}
