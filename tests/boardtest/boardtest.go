// Package boardtest is a fake board service for the tests of the board's
// clients (the CLI, the MCP tools): a plain NATS server started in the test
// (nkey users, no permissions) and a responder on the board's request
// subjects that records every request and answers as the test says. It
// checks what a client sends and how it shows what it gets; the real
// service's rules are its own tests'.
package boardtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/protocol"
)

// Agent is the one agent the fake bus knows.
const Agent = "agent-1"

// Request is one request the fake received.
type Request struct {
	Subject string
	Caller  string // protocol.OperatorUser or the agent's ID, from the subject
	Op      string
	Body    protocol.BoardRequest
	Raw     string
}

// Fake is the bus and the responder.
type Fake struct {
	URL   string
	Seeds map[string]string // seed files: protocol.OperatorUser and Agent

	srv  *server.Server
	nc   *nats.Conn
	subs []*nats.Subscription

	mu     sync.Mutex
	reqs   []Request
	handle func(Request) protocol.BoardReply
}

// Start starts the bus and the responder; the test's cleanup stops them.
// Until Handle is called every request is refused (code internal).
func Start(t testing.TB) *Fake {
	t.Helper()
	dir := t.TempDir()
	f := &Fake{Seeds: map[string]string{}}
	var users []*server.NkeyUser
	for _, u := range []string{protocol.OperatorUser, Agent, "board"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		f.Seeds[u] = filepath.Join(dir, u+".nk")
		if err := os.WriteFile(f.Seeds[u], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		users = append(users, &server.NkeyUser{Nkey: pub})
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Nkeys: users})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	f.srv, f.URL = srv, srv.ClientURL()
	t.Cleanup(srv.Shutdown)
	f.nc = f.Connect(t, "board")
	for _, subject := range []string{protocol.SubjectBoardOperator, protocol.SubjectBoardAgentRequests} {
		sub, err := f.nc.Subscribe(subject, f.serve)
		if err != nil {
			t.Fatal(err)
		}
		f.subs = append(f.subs, sub)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// Connect connects as user (protocol.OperatorUser, Agent or "board") with
// the user's reply-inbox prefix, as the flock's clients do.
func (f *Fake) Connect(t testing.TB, user string) *nats.Conn {
	t.Helper()
	nk, err := nats.NkeyOptionFromSeed(f.Seeds[user])
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.URL, nk, nats.CustomInboxPrefix(protocol.InboxPrefix(user)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (f *Fake) serve(m *nats.Msg) {
	r := Request{Subject: m.Subject, Raw: string(m.Data)}
	r.Caller, r.Op, _ = protocol.BoardCaller(m.Subject)
	var rep protocol.BoardReply
	if err := json.Unmarshal(m.Data, &r.Body); err != nil {
		rep = protocol.BoardReply{Error: "unreadable request: " + err.Error(), Code: protocol.BoardErrInvalid}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	handle := f.handle
	f.mu.Unlock()
	if rep.Error == "" {
		if handle != nil {
			rep = handle(r)
		} else {
			rep = protocol.BoardReply{Error: "the test set no handler", Code: protocol.BoardErrInternal}
		}
	}
	rep.V = protocol.Version
	b, _ := json.Marshal(rep)
	_ = m.Respond(b)
}

// Handle sets how the fake answers.
func (f *Fake) Handle(fn func(Request) protocol.BoardReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle = fn
}

// Requests returns the requests so far and forgets them.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// Publish publishes a task's transition, as the service does.
func (f *Fake) Publish(t protocol.BoardTask) {
	b, _ := json.Marshal(t)
	_ = f.nc.Publish(protocol.BoardEventSubject(t.Plan, t.ID), b)
	_ = f.nc.Flush()
}

// Stop stops answering: requests find no responders, as with no service.
func (f *Fake) Stop() {
	for _, s := range f.subs {
		_ = s.Unsubscribe()
	}
	_ = f.nc.Flush()
}

// Refuse is a refusal reply.
func Refuse(code, msg string) protocol.BoardReply {
	return protocol.BoardReply{Error: msg, Code: code}
}
