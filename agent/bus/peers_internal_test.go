package bus

import (
	"bytes"
	"strings"
	"testing"
)

// The accept watch tells the server's acceptance of a CONNECT (its first
// PONG) from a refusal, read whole or a byte at a time, and stops reading
// once it knows (a PONG in a later message's payload is not read).
func TestAcceptWatch(t *testing.T) {
	for _, c := range []struct {
		name, out string
		accepted  bool
	}{
		{"accepted", "INFO {\"server_id\":\"x\",\"nonce\":\"PONG\"}\r\nPONG\r\nMSG a 1 4\r\nPONG\r\n", true},
		{"verbose", "INFO {}\r\n+OK\r\nPONG\r\n", true},
		{"refused", "INFO {}\r\n-ERR 'Authorization Violation'\r\nPONG\r\n", false},
		{"no PONG", "INFO {}\r\nPING\r\n", false},
		{"PONG inside a line", "INFO {\"x\":\"\r PONG\"}\r\n", false},
		{"too long before", "INFO " + strings.Repeat("x", acceptWatchMax+10) + "\r\nPONG\r\n", false},
	} {
		for _, step := range []int{0, 1} {
			var got bytes.Buffer
			w := &acceptWatch{w: &got}
			if step == 0 {
				_, _ = w.Write([]byte(c.out))
			} else {
				for i := range len(c.out) {
					_, _ = w.Write([]byte{c.out[i]})
				}
			}
			if w.accepted.Load() != c.accepted {
				t.Errorf("%s (step %d): accepted %v, want %v", c.name, step, w.accepted.Load(), c.accepted)
			}
			if got.String() != c.out {
				t.Errorf("%s (step %d): passed on %q, want it all untouched", c.name, step, got.String())
			}
		}
	}
}
