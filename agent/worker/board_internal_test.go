package worker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ai-flock/ai-flock/agent/board"
)

// What the board is given of a command's output is what it takes: valid
// UTF-8, no NUL byte, within its limit, cut on a whole character.
func TestBoardText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		n    int
		want string
	}{
		{"short", []byte("ok\n"), 10, "ok\n"},
		{"tail cut mid-character", []byte("aé" + strings.Repeat("é", 3)), 7, "ééé"},
		{"starts mid-character", []byte("\xa9bc"), 10, "bc"},
		{"NUL bytes dropped", []byte("a\x00b\x00"), 10, "ab"},
		{"invalid bytes replaced", []byte("a\xffb"), 10, "a\uFFFDb"},
	} {
		got := tailText(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.n {
			t.Errorf("%s: tailText(%q, %d) = %q, want %q", tc.name, tc.in, tc.n, got, tc.want)
		}
	}
	if got := board.Text("é"+strings.Repeat("x", 10), 4, false); got != "éxx" {
		t.Errorf("head: %q", got)
	}
}
