package protocol

import (
	"strings"
	"testing"
)

// A label is one lower-case token of at most MaxBoardLabel bytes: the same
// rule for a task's labels (the board service) and an agent's (the stack's
// config).
func TestValidBoardLabel(t *testing.T) {
	for _, s := range []string{"go", "a", "0", "gpu-large", "lang_go", "x86-64", strings.Repeat("a", MaxBoardLabel)} {
		if !ValidBoardLabel(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "Go", "-go", "_go", "go lang", "go.lang", "go*", "go>", "gö", "go\n", strings.Repeat("a", MaxBoardLabel+1)} {
		if ValidBoardLabel(s) {
			t.Errorf("%q accepted", s)
		}
	}
}
