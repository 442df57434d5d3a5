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
}

// feed reads in and appends to out what to pass on to the server. An error
// (wrapping errRefused) says why the connection must close; out then holds
// what was passed before it.
func (g *replyGuard) feed(in, out []byte) ([]byte, error) {
	for len(in) > 0 {
		switch {
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
