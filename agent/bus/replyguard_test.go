package bus

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// guardFor is a guard whose rules know one agent (nkey UAGENT) by its
// permissions as busconfig renders them, and the bus's own admin (UADMIN,
// no permissions).
func guardFor() *replyGuard {
	var r replyRules
	r.set([]*server.NkeyUser{
		{Nkey: "UAGENT", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"task.result.agent-1", "_INBOX.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.agent-1.>", "broadcast"}},
		}},
		{Nkey: "UADMIN"},
	})
	return &replyGuard{rules: &r}
}

const agentConnect = "CONNECT {\"verbose\":false,\"nkey\":\"UAGENT\",\"sig\":\"x\"}\r\n"

// feedAll feeds in one call and again a byte at a time: the guard must
// pass on the same either way (a read can end anywhere).
func feedAll(t *testing.T, in string) (string, error) {
	t.Helper()
	whole, werr := guardFor().feed([]byte(in), nil)
	g := guardFor()
	var bytewise []byte
	var berr error
	for i := 0; i < len(in) && berr == nil; i++ {
		bytewise, berr = g.feed([]byte{in[i]}, bytewise)
	}
	if string(whole) != string(bytewise) || (werr == nil) != (berr == nil) {
		t.Fatalf("fed whole: %q %v; fed a byte at a time: %q %v", whole, werr, bytewise, berr)
	}
	return string(whole), werr
}

func TestReplyGuardPassesWhatAClientSends(t *testing.T) {
	in := agentConnect + "PING\r\n" +
		"SUB _INBOX.agent-1.abc.* 1\r\n" +
		"SUB broadcast q 2\r\n" +
		"PUB task.result.agent-1 5\r\nhello\r\n" +
		"PUB $JS.API.CONSUMER.MSG.NEXT.FLOCK_TASKS.agent-1 _INBOX.agent-1.abc.1 11\r\n{\"batch\":1}\r\n" +
		"HPUB task.result.agent-1 _INBOX.agent-1.abc.2 12 14\r\nNATS/1.0\r\n\r\nhi\r\n" +
		"PUB empty 0\r\n\r\n" +
		"UNSUB 1\r\nUNSUB 2 5\r\nPONG\r\n"
	out, err := feedAll(t, in)
	if err != nil || out != in {
		t.Fatalf("a well-formed client's protocol: passed %q, %v", out, err)
	}
}

// What the server reads is what the guard checked: a line it would split
// the same way is written anew, in one spelling.
func TestReplyGuardWritesEachLineAnew(t *testing.T) {
	in := "connect {\"nkey\":\"UAGENT\"}\n" + "pub\tx  _INBOX.agent-1.r\t 2\nab\r\n" + "ping\r\n"
	want := "CONNECT {\"nkey\":\"UAGENT\"}\r\n" + "PUB x _INBOX.agent-1.r 2\r\nab\r\n" + "PING\r\n"
	if out, err := feedAll(t, in); err != nil || out != want {
		t.Fatalf("passed %q, %v; want %q", out, err, want)
	}
}

func TestReplyGuardRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, why string }{
		{"a reply into a stream's subject", "PUB $JS.API.CONSUMER.MSG.NEXT.S.c tasks.agent-2 2\r\n{}\r\n", "reply subject"},
		{"a reply that is an API call", "PUB $JS.ACK.S.c.1.1.1.1.0 $JS.API.STREAM.DELETE.FLOCK_MAIL_agent-2 4\r\n-NAK\r\n", "reply subject"},
		{"a reply into a bucket", "HPUB x $KV.FLOCK_LEDGER.agent-2 0 0\r\n\r\n", "reply subject"},
		{"a reply into another's inbox", "PUB x _INBOX.agent-2.abc 0\r\n\r\n", "reply subject"},
		{"a reply to a subject it may subscribe to but not own", "PUB x broadcast 0\r\n\r\n", "reply subject"},
		{"a reply with a wildcard", "PUB x _INBOX.agent-1.> 0\r\n\r\n", "reply subject"},
		{"a reply split by a CR", "PUB x _INBOX.agent-1.a\rtasks.agent-2 0\r\n\r\n", "arguments"},
		{"a second CONNECT", "CONNECT {\"nkey\":\"UADMIN\"}\r\n", "second CONNECT"},
		{"a payload longer than its size", "PUB x 1\r\nab\r\n", "longer than its size"},
		{"a size that is not a number", "PUB x 0x10\r\n", "size"},
		{"headers longer than the message", "HPUB x 5 2\r\n", "headers"},
		{"an operation clients do not send", "MSG x 1 0\r\n\r\n", "unknown operation"},
		{"INFO from a client", "INFO {}\r\n", "unknown operation"},
		{"a control line too long", "PUB " + strings.Repeat("a", maxControlLine) + " 0\r\n", "control line"},
		{"a control line too long, never ended", "SUB " + strings.Repeat("a", maxControlLine+1), "control line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := feedAll(t, agentConnect+tc.in)
			if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("error %v, want a refusal naming %q", err, tc.why)
			}
			if !strings.HasPrefix(out, "CONNECT ") || strings.Contains(out[len(agentConnect):], tc.in) {
				t.Fatalf("passed on %q", out)
			}
		})
	}
	if _, err := feedAll(t, "PUB x 0\r\n\r\n"); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "before CONNECT") {
		t.Fatalf("a PUB before CONNECT: %v", err)
	}
	// A user the rules do not know (the server will refuse it) gives no reply.
	if _, err := feedAll(t, "CONNECT {\"nkey\":\"UNOBODY\"}\r\nPUB x _INBOX.agent-1.a 0\r\n\r\n"); !errors.Is(err, errRefused) {
		t.Fatalf("an unknown user's reply: %v", err)
	}
	// The bus's own users (no permissions) may give any.
	if out, err := feedAll(t, "CONNECT {\"nkey\":\"UADMIN\"}\r\nPUB x tasks.agent-2 0\r\n\r\n"); err != nil || !strings.HasSuffix(out, "PUB x tasks.agent-2 0\r\n\r\n") {
		t.Fatalf("the admin's reply: %q %v", out, err)
	}
}

// Whatever a client sends, the guard passes on only lines it parsed and
// payloads of the size their line gave, never a reply outside the
// client's inbox.
func FuzzReplyGuard(f *testing.F) {
	f.Add([]byte("PUB a _INBOX.agent-1.x 2\r\nhi\r\nPING\r\n"))
	f.Add([]byte("HPUB a b 1 2\r\nxy\r\n"))
	f.Add([]byte("SUB a 1\r\nPUB a tasks.x 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		g := guardFor()
		out, _ := g.feed(append([]byte(agentConnect), in...), nil)
		// Read the output back: it must itself pass a fresh guard whole.
		again, err := guardFor().feed(out, nil)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("the guard's own output does not pass it again: %v\n%q\n%q", err, out, again)
		}
	})
}

// BenchmarkReplyGuard is what the guard costs the bytes a client sends,
// against passing them on as they are (the relay before the guard), in the
// same run: a stream of publishes with replies, read 32 KiB at a time.
func BenchmarkReplyGuard(b *testing.B) {
	for _, size := range []int{128, 4096} {
		var stream []byte
		payload := bytes.Repeat([]byte("x"), size)
		for len(stream) < 1<<20 {
			stream = append(stream, "PUB task.result.agent-1 _INBOX.agent-1.AbCdEfGhIjKlMnOpQrStUv.1 "...)
			stream = append(stream, strconv.Itoa(size)...)
			stream = append(stream, "\r\n"...)
			stream = append(append(stream, payload...), "\r\n"...)
		}
		run := func(b *testing.B, pass func(chunk, out []byte) []byte) {
			b.SetBytes(int64(len(stream)))
			out := make([]byte, 0, 64<<10)
			for b.Loop() {
				for chunk := range slices.Chunk(stream, 32<<10) {
					out = pass(chunk, out[:0])
				}
			}
		}
		b.Run(fmt.Sprintf("payload=%d/as-is", size), func(b *testing.B) {
			run(b, func(chunk, out []byte) []byte { return append(out, chunk...) })
		})
		b.Run(fmt.Sprintf("payload=%d/guard", size), func(b *testing.B) {
			g := guardFor()
			if _, err := g.feed([]byte(agentConnect), nil); err != nil {
				b.Fatal(err)
			}
			run(b, func(chunk, out []byte) []byte {
				out, err := g.feed(chunk, out)
				if err != nil {
					b.Fatal(err)
				}
				return out
			})
		})
	}
}

// An inbox message's Nats-Msg-Id is its sender's own: one starting with
// "<from>:" of the subject passes as sent (fed whole or a byte at a time);
// another sender's prefix, or none, closes the connection, naming the rule,
// and none of that message reaches the server. A header the server would not
// read as the ID (another case) is no ID and passes.
func TestReplyGuardInboxMessageIDsAreTheSenders(t *testing.T) {
	hpub := func(subject, hdr, body string) string {
		h := "NATS/1.0\r\n" + hdr + "\r\n"
		return fmt.Sprintf("HPUB %s _INBOX.agent-1.r %d %d\r\n%s%s\r\n", subject, len(h), len(h)+len(body), h, body)
	}
	for _, in := range []string{
		hpub("agent.agent-2.inbox.agent-1", "Nats-Msg-Id: agent-1:m-1\r\n", `{"v":1}`),
		hpub("agent.agent-2.inbox.agent-1", "Flock-Receipt: _INBOX.agent-1.x\r\nNats-Msg-Id:agent-1:m-2\r\n", ""),
		hpub("agent.agent-2.inbox.agent-1", "Flock-Receipt: _INBOX.agent-1.x\r\n", "no id: nothing to squat"),
		hpub("agent.agent-2.inbox.agent-1", "nats-msg-id: operator:m-3\r\n", "the server reads no ID here"),
		hpub("task.result.agent-1", "Nats-Msg-Id: operator:m-4\r\n", "not an inbox"),
		"PUB agent.agent-2.inbox.agent-1 2\r\nhi\r\n",
	} {
		if out, err := feedAll(t, agentConnect+in+"PING\r\n"); err != nil || out != agentConnect+in+"PING\r\n" {
			t.Errorf("%q: passed %q, %v", in, out, err)
		}
	}
	for _, tc := range []struct{ in, why string }{
		{hpub("agent.agent-2.inbox.agent-1", "Nats-Msg-Id: operator:m-1\r\n", `{"v":1}`), `"operator:m-1" on agent.agent-2.inbox.agent-1 does not start with "agent-1:"`},
		{hpub("agent.agent-2.inbox.agent-1", "Nats-Msg-Id: m-1\r\n", ""), `"m-1"`},
		{hpub("agent.agent-2.inbox.agent-1", "Nats-Msg-Id: agent-1\r\n", ""), `does not start with "agent-1:"`},
		{hpub("agent.agent-2.inbox.agent-1", "X: y\r\nNats-Msg-Id:   agent-10:m\r\n", ""), `"agent-10:m"`},
		{hpub("agent.agent-2.inbox.agent-1", "Nats-Msg-Idx: agent-1:a\r\nNats-Msg-Id: operator:b\r\n", ""), `"operator:b"`},
		{hpub("agent.agent-2.inbox.agent-1", strings.Repeat("X", maxInboxHeaders), ""), "headers of"},
	} {
		out, err := feedAll(t, agentConnect+tc.in)
		if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%q: error %v, want a refusal naming %s", tc.in, err, tc.why)
		}
		if out != agentConnect {
			t.Errorf("%q: passed on %q", tc.in, out)
		}
	}
}

// msgID reads the header as nats-server does: the first key right after a
// CRLF and before a colon, leading spaces of the value skipped.
func TestMsgIDReadsAsTheServer(t *testing.T) {
	for hdr, want := range map[string]string{
		"NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n":                "a",
		"NATS/1.0\r\nNats-Msg-Id:   a b \r\n\r\n":           "a b ",
		"NATS/1.0\r\nX: Nats-Msg-Id: b\r\n\r\n":             "",
		"NATS/1.0\r\nNats-Msg-Id: a\r\nNats-Msg-Id: b\r\n":  "a",
		"NATS/1.0\r\nNats-Msg-Ids: a\r\nNats-Msg-Id: b\r\n": "b",
		"NATS/1.0\r\n\r\n":                                  "",
	} {
		if got := string(msgID([]byte(hdr))); got != want {
			t.Errorf("%q: %q, want %q", hdr, got, want)
		}
	}
}
