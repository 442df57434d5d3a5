package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/ai-flock/ai-flock/protocol"
)

// Stored is what an inbox file holds. From is the sender the bus vouched for
// (the last token of agent.<id>.inbox.<from>; "operator" for a broadcast);
// whatever the body claimed is replaced, and a different claim is noted in
// Problem.
type Stored struct {
	V        int              `json:"v"`
	Kind     string           `json:"kind"` // inbox | broadcast
	Subject  string           `json:"subject"`
	From     string           `json:"from"`
	Received time.Time        `json:"received"`
	Message  protocol.Message `json:"message"`
	Problem  string           `json:"problem,omitempty"` // the body was not a valid message; Message.Body holds it as text
}

// subscribeBroadcast subscribes to broadcast: each announcement is stored as
// one JSON file in <agent dir>/inbox/ and confirmed with an event and a
// receipt on its reply subject. A broadcast does not wait for agents that
// are down; inbox messages do (mailLoop).
func (a *Agent) subscribeBroadcast() ([]*nats.Subscription, error) {
	s, err := a.nc.Subscribe(protocol.SubjectBroadcast, a.broadcast)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", protocol.SubjectBroadcast, err)
	}
	return []*nats.Subscription{s}, nil
}

func (a *Agent) broadcast(m *nats.Msg) {
	from := protocol.OperatorUser // only the operator may broadcast
	// A broadcast that asks for no receipt is not stored: had it been lost
	// on the way, its sender would never know.
	if m.Reply == "" {
		if a.senders.warn(from) {
			a.log.Warn("broadcast without a reply subject not stored: senders must ask for a receipt")
		}
		return
	}
	st := stored("broadcast", m.Subject, from, m.Data)
	receipt := protocol.Receipt{V: protocol.Version, ID: st.Message.ID, To: a.cfg.ID, From: from}
	if !a.mail.submit(from, func(context.Context) {
		if n := a.untaken.count(from); n >= protocol.InboxPerSender {
			receipt.Error = fmt.Sprintf("refused: %s holds %d messages from %s it has not taken (at most %d of one sender)", a.cfg.ID, n, from, protocol.InboxPerSender)
		} else if rel, err := a.write(st); err != nil {
			receipt.Error = "not stored: " + err.Error()
		} else {
			receipt.Status, receipt.File = protocol.ReceiptDelivered, rel
		}
		a.respond(m.Reply, receipt)
	}) {
		receipt.Error = fmt.Sprintf("refused: %d messages from %s are waiting to be stored", mailQueue, from)
		a.respond(m.Reply, receipt)
	}
}

// stored is what the agent keeps of a message: the sender the bus vouched
// for (never the body's claim), the body as sent, or as text with a
// problem noted when it is not a message.
func stored(kind, subject, from string, data []byte) Stored {
	st := Stored{V: protocol.Version, Kind: kind, Subject: subject, From: from, Received: time.Now().UTC()}
	if err := json.Unmarshal(data, &st.Message); err != nil || st.Message.V > protocol.Version {
		st.Message = protocol.Message{V: protocol.Version}
		if err != nil {
			st.Problem = "not a JSON message: stored as text"
		} else {
			st.Problem = "unsupported message version: stored as text"
		}
		if utf8.Valid(data) {
			st.Message.Body = string(data)
		} else {
			st.Message.Body = fmt.Sprintf("(%d bytes of binary data)", len(data))
		}
	}
	if claim := st.Message.From; claim != "" && claim != from {
		st.Problem = strings.TrimPrefix(st.Problem+"; ", "; ") + fmt.Sprintf("the body claimed to be from %q: ignored, the bus vouches for %q", claim, from)
	}
	st.Message.From = from
	if !protocol.ValidTaskID(st.Message.ID) {
		st.Message.ID = randomID()
	}
	return st
}

// write stores one message in a file of the inbox directory (synced: once
// written it survives a crash) and announces it; it returns the file,
// relative to the agent's directory.
func (a *Agent) write(st Stored) (string, error) {
	name := fmt.Sprintf("%s-%06d-%s-%s.json", st.Received.Format("20060102T150405.000000000Z"), a.inboxN.Add(1)%1000000, st.Kind, st.Message.ID)
	b, _ := protocol.Encode(st, true)
	if err := writeDurable(filepath.Join(a.inboxDir, name), append(b, '\n')); err != nil {
		a.log.Error("message not stored", "kind", st.Kind, "id", st.Message.ID, "from", st.From, "err", err)
		return "", err
	}
	a.untaken.note(name, st.From)
	rel := filepath.Join("inbox", name)
	a.log.Info("message stored", "kind", st.Kind, "id", st.Message.ID, "from", st.From, "file", rel)
	typ := protocol.EventInbox
	if st.Kind == "broadcast" {
		typ = protocol.EventBroadcast
	}
	a.event(typ, st.Message.ID, rel)
	if a.inboxN.Load()%64 == 0 {
		select {
		case a.pruneReq <- "inbox":
		default:
		}
	}
	return rel, nil
}

// mailQueue is how many messages of one sender may wait to be stored: what
// its share of the mailbox can hold, and a little more for redeliveries.
const mailQueue = protocol.MailPerSender + 16

// mailroom stores each sender's messages in order, on a goroutine of the
// sender's own (senders are bus users: bounded by the flock's size). Jobs
// get a context that ends when the mailroom closes, so a job waiting on its
// sender's rate gives the message back instead of holding the agent's stop.
type mailroom struct {
	mu     sync.Mutex
	queues map[string]chan func(context.Context)
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newMailroom() *mailroom {
	ctx, cancel := context.WithCancel(context.Background())
	return &mailroom{queues: map[string]chan func(context.Context){}, ctx: ctx, cancel: cancel}
}

// submit queues job for sender; false when its queue is full or the
// mailroom closed.
func (r *mailroom) submit(sender string, job func(context.Context)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	q := r.queues[sender]
	if q == nil {
		q = make(chan func(context.Context), mailQueue)
		r.queues[sender] = q
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for job := range q {
				job(r.ctx)
			}
		}()
	}
	select {
	case q <- job:
		return true
	default:
		return false
	}
}

// close ends the jobs' context, runs what is queued (mail waiting for its
// sender's rate goes back to the mailbox; broadcasts already taken are
// stored) and stops taking more.
func (r *mailroom) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		r.cancel()
		for _, q := range r.queues {
			close(q)
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// senderLimits bounds what each sender (as the bus vouched for it) can make
// the agent store: messages and bytes per second, each with a burst. Senders
// are bus users, so the map is bounded by the flock's size.
type senderLimits struct {
	mu    sync.Mutex
	rate  int
	bytes int64
	by    map[string]*senderLimit
}

type senderLimit struct {
	msgs, bytes *rate.Limiter
	warned      time.Time
}

func newSenderLimits(msgs int, bytes int64) *senderLimits {
	return &senderLimits{rate: msgs, bytes: bytes, by: map[string]*senderLimit{}}
}

// get is sender's entry, made on first use (s.mu held).
func (s *senderLimits) get(sender string) *senderLimit {
	l := s.by[sender]
	if l == nil {
		l = &senderLimit{
			msgs:  rate.NewLimiter(rate.Limit(s.rate), 5*s.rate),
			bytes: rate.NewLimiter(rate.Limit(s.bytes), int(8*s.bytes)),
		}
		s.by[sender] = l
	}
	return l
}

// wait waits until sender may have one more message of n bytes stored
// (INBOX_RATE, INBOX_BYTES_RATE), or ctx ends.
func (s *senderLimits) wait(ctx context.Context, sender string, n int) error {
	s.mu.Lock()
	l := s.get(sender)
	s.mu.Unlock()
	if err := l.msgs.Wait(ctx); err != nil {
		return err
	}
	return l.bytes.WaitN(ctx, min(n, l.bytes.Burst()))
}

// warn reports whether a refusal from sender should be logged (once a second).
func (s *senderLimits) warn(sender string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.get(sender)
	if time.Since(l.warned) < time.Second {
		return false
	}
	l.warned = time.Now()
	return true
}

// respond sends a receipt to subject, a sender's reply inbox only: a reply
// subject elsewhere (a task subject, another agent's heartbeat, the
// JetStream API) is a peer trying to make this agent publish there in its
// own name. The bus refuses it too.
func (a *Agent) respond(subject string, r protocol.Receipt) {
	if subject == "" {
		return
	}
	if !protocol.IsReplyInbox(subject) {
		a.log.Warn("receipt not sent: the reply subject is not a reply inbox", "id", r.ID, "from", r.From, "reply", subject)
		return
	}
	b, _ := json.Marshal(r)
	if err := a.nc.Publish(subject, b); err != nil {
		a.log.Warn("receipt not sent", "id", r.ID, "to", r.From, "err", err)
	}
}

// pruneLoop keeps the newest TASK_KEEP task directories and INBOX_KEEP taken
// inbox files; untaken messages are never pruned (taken.go).
func (a *Agent) pruneLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case what := <-a.pruneReq:
			switch what {
			case "tasks":
				a.prune(a.tasksDir, a.cfg.TaskKeep, true)
			case "inbox":
				a.prune(filepath.Join(a.inboxDir, TakenDir), a.cfg.InboxKeep, false)
			}
		}
	}
}

func (a *Agent) prune(dir string, keep int, dirs bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type item struct {
		name string
		mod  time.Time
	}
	var items []item
	for _, e := range entries {
		if e.IsDir() != dirs || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if a.running.has(e.Name()) {
			continue
		}
		if info, err := e.Info(); err == nil {
			items = append(items, item{e.Name(), info.ModTime()})
		}
	}
	if len(items) <= keep {
		return
	}
	sort.Slice(items, func(i, j int) bool { return items[i].mod.After(items[j].mod) })
	for _, it := range items[keep:] {
		if err := os.RemoveAll(filepath.Join(dir, it.name)); err != nil {
			a.log.Warn("prune", "path", it.name, "err", err)
		}
	}
	a.log.Info("pruned old entries", "dir", dir, "removed", len(items)-keep, "kept", keep)
}

func randomID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
