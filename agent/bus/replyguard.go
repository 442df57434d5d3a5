package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
)

// Why the bus reads what each client sends: nats-server checks a message's
// subject against the sender's publish permissions but never its reply
// subject, and JetStream answers a request (a pull, an ack, an API call, a
// publish's ack) on the reply subject through its own internal client, past
// every permission. An agent allowed only to pull its own consumer could
// give $JS.API.STREAM.DELETE.<another agent's stream> as the reply of a
// malformed pull: the server's error answer, an empty message, then deleted
// that stream; with the reply set to a stream's subject (tasks.agent-2,
// $KV.FLOCK_LEDGER.agent-2) the answer was stored there in nobody's name.
// Permissions cannot say "a reply subject must be one's own", so the bus
// says it here: a client may give as a reply only a subject in its own
// reply inbox, as its subscribe permissions name it (_INBOX.<user>.>).
//
// The guard parses the client protocol (CONNECT, PUB, HPUB, SUB, UNSUB,
// PING, PONG) and passes on each control line as it understood it, written
// anew, so the server reads exactly what was checked: no line the two would
// read differently reaches the server. Anything else closes the connection.
//
// The guard also reads the headers of a message on an inbox subject,
// agent.<to>.inbox.<from>: a mailbox drops a message whose Nats-Msg-Id it
// stored in the last two minutes, whoever sent that one, so an agent giving
// the ID the operator was about to use had the operator's message answered
// "queued" and dropped. An inbox message's ID must start with "<from>:"
// (protocol.MailMsgID), the sender's own, which the subject proves (the bus
// lets a user publish there only as itself): one sender's IDs can never
// collide with another's. The header is read as the server reads it.

// maxControlLine is nats-server's own bound on a client's control line.
const maxControlLine = server.MAX_CONTROL_LINE_SIZE

// replyRules are the reply subjects each bus user may give, by nkey.
type replyRules struct {
	by atomic.Pointer[map[string]replyRule]
}

// replyRule is one user's: any reply (a user without permissions: the
// bus's own), or a subject matching one of inboxes.
type replyRule struct {
	any     bool
	inboxes []string
}

// set derives the rules from the server's users: each user's subscribe
// permissions under _INBOX. are the reply subjects it may give.
func (r *replyRules) set(users []*server.NkeyUser) {
	m := make(map[string]replyRule, len(users))
	for _, u := range users {
		if u.Permissions == nil || u.Permissions.Subscribe == nil {
			m[u.Nkey] = replyRule{any: true}
			continue
		}
		var rule replyRule
		for _, s := range u.Permissions.Subscribe.Allow {
			if strings.HasPrefix(s, "_INBOX.") {
				rule.inboxes = append(rule.inboxes, s)
			}
		}
		m[u.Nkey] = rule
	}
	r.by.Store(&m)
}

// of is the rule of the user with that nkey; an unknown user (the server
// will refuse it anyway) may give no reply.
func (r *replyRules) of(nkey string) replyRule {
	if m := r.by.Load(); m != nil {
		return (*m)[nkey]
	}
	return replyRule{}
}

func (r replyRule) allows(reply []byte) bool {
	if r.any {
		return true
	}
	for _, inbox := range r.inboxes {
		// The usual pattern, "_INBOX.<user>.>": a literal subject below it.
		if prefix, ok := strings.CutSuffix(inbox, ">"); ok && !strings.ContainsAny(prefix, "*>") {
			if len(reply) > len(prefix) && string(reply[:len(prefix)]) == prefix && server.IsValidLiteralSubject(string(reply)) {
				return true
			}
			continue
		}
		if server.IsValidLiteralSubject(string(reply)) && server.SubjectMatchesFilter(string(reply), inbox) {
			return true
		}
	}
	return false
}

// errRefused is a client message the guard does not pass on.
var errRefused = errors.New("refused")

// replyGuard reads one client connection's protocol as it streams in.
type replyGuard struct {
	rules     *replyRules
	rule      replyRule
	User      string // the nkey the client connected with
	connected bool
	line      []byte // the control line read so far
	payload   int    // payload bytes still to pass on
	trailer   int    // bytes of the CRLF after a payload still to come
	args      [][]byte
	// An inbox HPUB is held (its control line and headers) until its
	// headers are read and checked; held then passes on with the rest.
	held     []byte
	hdrLeft  int    // header bytes still to read into held
	hdrSize  int    // the header's size
	hdrFrom  string // the sender the inbox subject names
	hdrTo    string
	bodySize int // the payload's bytes after the header
}

// maxInboxHeaders bounds the headers of an inbox message the guard holds to
// read (a mailbox keeps 4 KiB of headers beside the body).
const maxInboxHeaders = 4 << 10

// feed reads in and appends to out what to pass on to the server. An error
// (wrapping errRefused) says why the connection must close; out then holds
// what was passed before it.
func (g *replyGuard) feed(in, out []byte) ([]byte, error) {
	for len(in) > 0 {
		switch {
		case g.hdrLeft > 0:
			k := min(g.hdrLeft, len(in))
			g.held = append(g.held, in[:k]...)
			in, g.hdrLeft = in[k:], g.hdrLeft-k
			if g.hdrLeft == 0 {
				hdr := g.held[len(g.held)-g.hdrSize:]
				if id := msgID(hdr); id != nil && !bytes.HasPrefix(id, []byte(g.hdrFrom+":")) {
					return out, fmt.Errorf("%w: inbox message ID %.64q on agent.%s.inbox.%s does not start with %q: a sender's message IDs are its own", errRefused, id, g.hdrTo, g.hdrFrom, g.hdrFrom+":")
				}
				out = append(out, g.held...)
				g.held = g.held[:0]
				g.payload = g.bodySize
				if g.payload == 0 {
					g.trailer = 2
				}
			}
		case g.payload > 0:
			k := min(g.payload, len(in))
			out = append(out, in[:k]...)
			in, g.payload = in[k:], g.payload-k
			if g.payload == 0 {
				g.trailer = 2
			}
		case g.trailer > 0:
			if in[0] != "\r\n"[2-g.trailer] {
				return out, fmt.Errorf("%w: a payload longer than its size", errRefused)
			}
			out = append(out, in[0])
			in, g.trailer = in[1:], g.trailer-1
		default:
			i := bytes.IndexByte(in, '\n')
			if i < 0 {
				if len(g.line)+len(in) > maxControlLine {
					return out, fmt.Errorf("%w: a control line over %d bytes", errRefused, maxControlLine)
				}
				g.line = append(g.line, in...)
				return out, nil
			}
			if len(g.line)+i > maxControlLine {
				return out, fmt.Errorf("%w: a control line over %d bytes", errRefused, maxControlLine)
			}
			line := append(g.line, in[:i]...)
			in, g.line = in[i+1:], line[:0]
			var err error
			if out, err = g.op(line, out); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// op checks one control line (without its \n) and appends it, written anew.
func (g *replyGuard) op(line, out []byte) ([]byte, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	name, rest := line, []byte(nil)
	if i := bytes.IndexAny(line, " \t"); i >= 0 {
		name, rest = line[:i], line[i+1:]
	}
	verb := verbOf(name)
	if !g.connected && verb != "CONNECT" {
		return out, fmt.Errorf("%w: %.10q before CONNECT", errRefused, name)
	}
	switch verb {
	case "CONNECT":
		if g.connected {
			return out, fmt.Errorf("%w: a second CONNECT", errRefused)
		}
		// nats-server reads CONNECT's JSON into its own options, with this tag.
		var opts struct {
			Nkey string `json:"nkey,omitempty"`
		}
		js := bytes.TrimLeft(rest, " \t")
		if err := json.Unmarshal(js, &opts); err != nil {
			return out, fmt.Errorf("%w: CONNECT: %v", errRefused, err)
		}
		g.connected, g.User, g.rule = true, opts.Nkey, g.rules.of(opts.Nkey)
		out = append(out, "CONNECT "...)
		out = append(out, js...)
		return append(out, "\r\n"...), nil
	case "PUB", "HPUB":
		args := g.split(rest)
		sizes := 1
		if verb == "HPUB" {
			sizes = 2
		}
		if len(args) != sizes+1 && len(args) != sizes+2 {
			return out, fmt.Errorf("%w: %s with %d arguments", errRefused, verb, len(args))
		}
		if len(args) == sizes+2 && !g.rule.allows(args[1]) {
			return out, fmt.Errorf("%w: reply subject %.64q is not in the reply inbox of the user that connected", errRefused, args[1])
		}
		var n [2]int
		for i, a := range args[len(args)-sizes:] {
			v, ok := parseSize(a)
			if !ok {
				return out, fmt.Errorf("%w: %s size %.12q", errRefused, verb, a)
			}
			n[i] = v
		}
		if sizes == 2 && n[0] > n[1] {
			return out, fmt.Errorf("%w: HPUB headers (%d bytes) longer than the message (%d)", errRefused, n[0], n[1])
		}
		if to, from, ok := inboxSubject(args[0]); ok && sizes == 2 && n[0] > 0 {
			if n[0] > maxInboxHeaders {
				return out, fmt.Errorf("%w: inbox message headers of %d bytes, over %d", errRefused, n[0], maxInboxHeaders)
			}
			// Held until its headers are read (feed).
			g.held = appendArgs(append(g.held[:0], verb...), args)
			g.hdrLeft, g.hdrSize, g.hdrTo, g.hdrFrom, g.bodySize = n[0], n[0], to, from, n[1]-n[0]
			return out, nil
		}
		out = appendArgs(append(out, verb...), args)
		g.payload = n[sizes-1]
		if g.payload == 0 {
			g.trailer = 2
		}
		return out, nil
	case "SUB", "UNSUB":
		args := g.split(rest)
		lo, hi := 2, 3
		if verb == "UNSUB" {
			lo, hi = 1, 2
		}
		if len(args) < lo || len(args) > hi {
			return out, fmt.Errorf("%w: %s with %d arguments", errRefused, verb, len(args))
		}
		return appendArgs(append(out, verb...), args), nil
	case "PING", "PONG":
		if len(g.split(rest)) != 0 {
			return out, fmt.Errorf("%w: %s with arguments", errRefused, verb)
		}
		return append(append(out, verb...), "\r\n"...), nil
	}
	return out, fmt.Errorf("%w: unknown operation %.10q", errRefused, name)
}

// inboxSubject reads agent.<to>.inbox.<from> (protocol.InboxSubject).
func inboxSubject(subject []byte) (to, from string, ok bool) {
	t := bytes.Split(subject, []byte("."))
	if len(t) != 4 || string(t[0]) != "agent" || string(t[2]) != "inbox" {
		return "", "", false
	}
	return string(t[1]), string(t[3]), true
}

// msgID is the Nats-Msg-Id of a message's headers as nats-server reads it
// (server.getHeader, which it does not export): the first "Nats-Msg-Id:",
// case as written, right after a CRLF, its value from the first non-space
// to the next CRLF; nil when there is none.
func msgID(hdr []byte) []byte {
	const key = "Nats-Msg-Id"
	for off := 0; ; {
		i := bytes.Index(hdr[off:], []byte(key))
		if i < 0 {
			return nil
		}
		i += off
		if i < 2 || i >= len(hdr)-1 || hdr[i-1] != '\n' || hdr[i-2] != '\r' {
			off = i + len(key)
			continue
		}
		if i+len(key) >= len(hdr) {
			return nil
		}
		if hdr[i+len(key)] != ':' {
			off = i + len(key)
			continue
		}
		v := i + len(key) + 1
		for v < len(hdr) && hdr[v] == ' ' {
			v++
		}
		end := v
		for end < len(hdr) && !(hdr[end] == '\r' && end < len(hdr)-1 && hdr[end+1] == '\n') {
			end++
		}
		return hdr[v:end]
	}
}

// verbOf is the operation a control line names, in upper case as the guard
// writes it ("" for one clients do not send); nats-server reads any case.
func verbOf(name []byte) string {
	for _, v := range []string{"PUB", "HPUB", "SUB", "UNSUB", "PING", "PONG", "CONNECT"} {
		if len(name) == len(v) && bytes.EqualFold(name, []byte(v)) {
			return v
		}
	}
	return ""
}

// split splits a control line's arguments as nats-server does (at space,
// tab, CR and LF), into an array the guard reuses for every line.
func (g *replyGuard) split(b []byte) [][]byte {
	args := g.args[:0]
	start := -1
	for i, c := range b {
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			if start >= 0 {
				args, start = append(args, b[start:i]), -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		args = append(args, b[start:])
	}
	g.args = args // its array, for the next line
	return args
}

func appendArgs(out []byte, args [][]byte) []byte {
	for _, a := range args {
		out = append(append(out, ' '), a...)
	}
	return append(out, "\r\n"...)
}

// parseSize reads a payload size as nats-server does: decimal digits only.
func parseSize(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil
}
