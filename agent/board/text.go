package board

import (
	"strings"
	"unicode/utf8"
)

// Text is s as the board takes a summary or a reason: valid UTF-8 (U+FFFD
// for what is not), no NUL byte, at most n bytes: its end when fromEnd (the
// tail of a command's output), else its beginning, cut on a whole character.
func Text(s string, n int, fromEnd bool) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= n {
		return s
	}
	if fromEnd {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		return s[i:]
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
