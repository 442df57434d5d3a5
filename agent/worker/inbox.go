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
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/protocol"
)

// stored is what an inbox file holds.
type stored struct {
	V        int              `json:"v"`
	Kind     string           `json:"kind"` // inbox | broadcast
	Subject  string           `json:"subject"`
	Received time.Time        `json:"received"`
	Message  protocol.Message `json:"message"`
	Problem  string           `json:"problem,omitempty"` // the body was not a valid message; Message.Body holds it as text
}

// subscribeMessages subscribes to the agent's inbox and to broadcast. Each
// message is stored as one JSON file in <agent dir>/inbox/, where the agent's
// work reads it (oldest first by name), and acknowledged with an event
// (inbox/broadcast) naming the message ID and the file.
func (a *Agent) subscribeMessages() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for subj, kind := range map[string]string{protocol.InboxSubject(a.cfg.ID): "inbox", protocol.SubjectBroadcast: "broadcast"} {
		s, err := a.nc.Subscribe(subj, func(m *nats.Msg) { a.store(kind, m) })
		if err != nil {
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	return subs, nil
}

func (a *Agent) store(kind string, m *nats.Msg) {
	st := stored{V: protocol.Version, Kind: kind, Subject: m.Subject, Received: time.Now().UTC()}
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
	if !protocol.ValidTaskID(st.Message.ID) {
		st.Message.ID = randomID()
	}
	name := fmt.Sprintf("%s-%06d-%s-%s.json", st.Received.Format("20060102T150405.000000000Z"), a.inboxN.Add(1)%1000000, kind, st.Message.ID)
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := writeAtomic(filepath.Join(a.inboxDir, name), append(b, '\n')); err != nil {
		a.log.Error("message not stored", "kind", kind, "id", st.Message.ID, "err", err)
		return
	}
	rel := filepath.Join("inbox", name)
	a.log.Info("message stored", "kind", kind, "id", st.Message.ID, "from", st.Message.From, "file", rel)
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
