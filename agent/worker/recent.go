package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// RecentLog keeps the agent's last log lines in memory (protocol.
// LogsKeepLines, each cut at protocol.LogsMaxLineBytes), for the operator's
// logs request: the log file is in the agent's own directory, which the
// operator does not reach.
type RecentLog struct {
	mu      sync.Mutex
	lines   []string // a ring: next is where the next line goes
	next    int
	full    bool
	partial []byte // a line written in pieces, until its newline
}

// NewRecentLog returns an empty RecentLog.
func NewRecentLog() *RecentLog {
	return &RecentLog{lines: make([]string, protocol.LogsKeepLines)}
}

// Write takes log output: every complete line is kept.
func (r *RecentLog) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.partial) < protocol.LogsMaxLineBytes {
				r.partial = append(r.partial, p[:min(len(p), protocol.LogsMaxLineBytes-len(r.partial))]...)
			}
			break
		}
		line := p[:i]
		if len(r.partial) > 0 {
			line = append(r.partial, line[:min(len(line), max(0, protocol.LogsMaxLineBytes-len(r.partial)))]...)
			r.partial = r.partial[:0]
		}
		r.keep(line)
		p = p[i+1:]
	}
	return n, nil
}

func (r *RecentLog) keep(line []byte) {
	if len(line) > protocol.LogsMaxLineBytes {
		line = line[:protocol.LogsMaxLineBytes]
	}
	r.lines[r.next] = string(line)
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
}

// Last returns up to n of the newest lines (all it keeps when n <= 0),
// oldest first, within protocol.LogsMaxBytes; truncated says older lines
// were left out for the byte bound.
func (r *RecentLog) Last(n int) (lines []string, truncated bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := r.next
	if r.full {
		count = len(r.lines)
	}
	if n <= 0 || n > count {
		n = count
	}
	size := 0
	out := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		l := r.lines[(r.next-i+len(r.lines))%len(r.lines)]
		if size+len(l) > protocol.LogsMaxBytes {
			truncated = true
			break
		}
		size += len(l)
		out = append(out, l)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, truncated
}

// subscribeLogs answers the operator's logs requests on the agent's own
// subject (only the operator may publish there).
func (a *Agent) subscribeLogs() (*nats.Subscription, error) {
	s, err := a.nc.Subscribe(protocol.LogsSubject(a.cfg.ID), a.answerLogs)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", protocol.LogsSubject(a.cfg.ID), err)
	}
	return s, nil
}

func (a *Agent) answerLogs(m *nats.Msg) {
	if !protocol.IsReplyInbox(m.Reply) {
		return // a reply inbox only: never answer onto another subject
	}
	var req protocol.LogsRequest
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			return
		}
	}
	reply := protocol.LogsReply{V: protocol.Version, Agent: a.cfg.ID, Lines: []string{}}
	if a.cfg.Recent != nil {
		reply.Lines, reply.Truncated = a.cfg.Recent.Last(req.Lines)
	}
	b, _ := json.Marshal(reply)
	_ = a.nc.Publish(m.Reply, b)
}

// running is the tasks an agent runs now (by their directory's name): the
// pruner leaves their directories, and heartbeats list them.
type running struct {
	mu    sync.Mutex
	next  uint64
	tasks map[uint64]protocol.RunningTask
}

// has reports whether a task of that ID runs now.
func (r *running) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.tasks {
		if t.ID == id {
			return true
		}
	}
	return false
}

// add records a task as started; the returned func records its end.
func (r *running) add(id, kind, traceparent string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tasks == nil {
		r.tasks = map[uint64]protocol.RunningTask{}
	}
	r.next++
	k := r.next
	r.tasks[k] = protocol.RunningTask{ID: id, Kind: kind, Since: time.Now().UTC(), Traceparent: traceparent}
	return func() {
		r.mu.Lock()
		delete(r.tasks, k)
		r.mu.Unlock()
	}
}

// list is the running tasks, oldest first.
func (r *running) list() []protocol.RunningTask {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tasks) == 0 {
		return nil
	}
	out := make([]protocol.RunningTask, 0, len(r.tasks))
	for _, t := range r.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b protocol.RunningTask) int { return a.Since.Compare(b.Since) })
	return out
}
