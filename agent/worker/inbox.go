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

// subscribeMessages subscribes to the agent's inbox (from any sender) and to
// broadcast. Each message is stored as one JSON file in <agent dir>/inbox/,
// where the agent's work reads it (oldest first by name), and acknowledged
// with an event (inbox/broadcast) naming the message ID and the file, and,
// when the sender asked (a request), with a receipt on its reply subject.
func (a *Agent) subscribeMessages() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for subj, kind := range map[string]string{protocol.InboxOf(a.cfg.ID): "inbox", protocol.SubjectBroadcast: "broadcast"} {
		s, err := a.nc.Subscribe(subj, func(m *nats.Msg) { a.store(kind, m) })
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

func (a *Agent) store(kind string, m *nats.Msg) {
	from := protocol.OperatorUser // only the operator may broadcast
	if kind == "inbox" {
		var ok bool
		if from, ok = protocol.InboxSender(m.Subject); !ok {
			a.log.Warn("message on an unexpected subject dropped", "subject", m.Subject)
			return
		}
	}
	// A message that asks for no receipt is not stored: had it been lost on
	// the way (a flooded receiver), its sender would never know. Every
	// message the agent keeps was confirmed to its sender; every other one
	// its sender hears about (refused, or no answer).
	if m.Reply == "" {
		if a.senders.warn(from) {
			a.log.Warn("message without a reply subject not stored: senders must ask for a receipt", "kind", kind, "from", from)
		}
		return
	}
	st := Stored{V: protocol.Version, Kind: kind, Subject: m.Subject, From: from, Received: time.Now().UTC()}
	if err := json.Unmarshal(m.Data, &st.Message); err != nil || st.Message.V > protocol.Version {
		st.Message = protocol.Message{V: protocol.Version}
		if err != nil {
			st.Problem = "not a JSON message: stored as text"
		} else {
			st.Problem = "unsupported message version: stored as text"
		}
		if utf8.Valid(m.Data) {
			st.Message.Body = string(m.Data)
		} else {
			st.Message.Body = fmt.Sprintf("(%d bytes of binary data)", len(m.Data))
		}
	}
	if claim := st.Message.From; claim != "" && claim != from {
		st.Problem = strings.TrimPrefix(st.Problem+"; ", "; ") + fmt.Sprintf("the body claimed to be from %q: ignored, the bus vouches for %q", claim, from)
	}
	st.Message.From = from
	if !protocol.ValidTaskID(st.Message.ID) {
		st.Message.ID = randomID()
	}
	receipt := protocol.Receipt{V: protocol.Version, ID: st.Message.ID, To: a.cfg.ID, From: from}
	if kind == "inbox" {
		if why := a.senders.allow(from, len(m.Data)); why != "" {
			receipt.Error = "refused: " + why
			a.respond(m, receipt)
			if a.senders.warn(from) {
				a.log.Warn("messages refused", "from", from, "why", why)
			}
			return
		}
	}
	// Stored by a queue of the sender's own: a flood from one sender
	// (each message synced to disk) never holds up another's.
	if !a.mail.submit(from, func() { a.write(kind, m, st, receipt) }) {
		receipt.Error = fmt.Sprintf("refused: %d messages from %s are waiting to be stored", mailQueue, from)
		a.respond(m, receipt)
	}
}

// write stores one message, answers its sender and announces it.
func (a *Agent) write(kind string, m *nats.Msg, st Stored, receipt protocol.Receipt) {
	from := st.From
	name := fmt.Sprintf("%s-%06d-%s-%s.json", st.Received.Format("20060102T150405.000000000Z"), a.inboxN.Add(1)%1000000, kind, st.Message.ID)
	b, _ := protocol.Encode(st, true)
	if err := writeDurable(filepath.Join(a.inboxDir, name), append(b, '\n')); err != nil {
		a.log.Error("message not stored", "kind", kind, "id", st.Message.ID, "from", from, "err", err)
		receipt.Error = "not stored: " + err.Error()
		a.respond(m, receipt)
		return
	}
	rel := filepath.Join("inbox", name)
	a.log.Info("message stored", "kind", kind, "id", st.Message.ID, "from", from, "file", rel)
	receipt.File = rel
	a.respond(m, receipt)
	typ := protocol.EventInbox
	if kind == "broadcast" {
		typ = protocol.EventBroadcast
	}
	a.event(typ, st.Message.ID, rel)
	if a.inboxN.Load()%64 == 0 {
		select {
		case a.pruneReq <- "inbox":
		default:
		}
	}
}

// mailQueue is how many messages of one sender may wait to be stored.
const mailQueue = 64

// mailroom stores each sender's messages in order, on a goroutine of the
// sender's own (senders are bus users: bounded by the flock's size).
type mailroom struct {
	mu     sync.Mutex
	queues map[string]chan func()
	closed bool
	wg     sync.WaitGroup
}

func newMailroom() *mailroom { return &mailroom{queues: map[string]chan func(){}} }

// submit queues job for sender; false when its queue is full or the
// mailroom closed.
func (r *mailroom) submit(sender string, job func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	q := r.queues[sender]
	if q == nil {
		q = make(chan func(), mailQueue)
		r.queues[sender] = q
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for job := range q {
				job()
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

// close stores what is queued and stops taking more.
func (r *mailroom) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
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

// allow takes one message of n bytes from sender, or says why not.
func (s *senderLimits) allow(sender string, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.get(sender)
	now := time.Now()
	if !l.msgs.AllowN(now, 1) {
		return fmt.Sprintf("%s sends more than %d messages/s to this agent (INBOX_RATE)", sender, s.rate)
	}
	if !l.bytes.AllowN(now, n) {
		return fmt.Sprintf("%s sends more than %d bytes/s to this agent (INBOX_BYTES_RATE)", sender, s.bytes)
	}
	return ""
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

// respond answers a message sent as a request with its receipt, into its
// sender's reply inbox only: a reply subject elsewhere (a task subject,
// another agent's heartbeat, the JetStream API) is a peer trying to make
// this agent publish there in its own name. The bus refuses it too.
func (a *Agent) respond(m *nats.Msg, r protocol.Receipt) {
	if m.Reply == "" {
		return
	}
	if !protocol.IsReplyInbox(m.Reply) {
		a.log.Warn("receipt not sent: the reply subject is not a reply inbox", "id", r.ID, "from", r.From, "reply", m.Reply)
		return
	}
	b, _ := json.Marshal(r)
	if err := m.Respond(b); err != nil {
		a.log.Warn("receipt not sent", "id", r.ID, "to", r.From, "err", err)
	}
}

// pruneLoop keeps the newest TASK_KEEP task directories and INBOX_KEEP inbox files.
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
				a.prune(a.inboxDir, a.cfg.InboxKeep, false)
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
		if _, busy := a.running.Load(e.Name()); busy {
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
