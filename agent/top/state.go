// Package top is `flock-agent top`: a live terminal dashboard of a flock.
// State is what the dashboard knows, fed by what crosses the bus (heartbeats,
// results and events as they happen) and by a periodic look at what the bus
// keeps (queues, the gateway's ledger, the board, the dead letters); view.go
// draws it and tui.go runs it in the terminal.
package top

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/agent/roster"
	"github.com/ai-flock/ai-flock/protocol"
)

// keepFailures is how many recent failures the dashboard shows.
const keepFailures = 8

// Agent is one agent's row.
type Agent struct {
	ID        string
	Known     bool // the bus has a consumer for it (it is in the topology)
	State     string
	Tasks     []protocol.RunningTask // from its last heartbeat, less those whose result came since
	Board     string                 // the board task it holds
	Heard     time.Time              // when its last heartbeat arrived (this machine's clock)
	Interval  time.Duration          // when to expect the next one
	Completed uint64                 // results since it started (its heartbeat's count)
	Failed    uint64
	Queue     uint64 // tasks waiting for it
	Spent     int64  // tokens in its budget's period
	Limit     int64  // 0: no cap
	Budgeted  bool   // the ledger has an entry for it
}

// HeartbeatAge is how long ago its last heartbeat arrived (-1: never).
func (a *Agent) HeartbeatAge(now time.Time) time.Duration {
	if a.Heard.IsZero() {
		return -1
	}
	return now.Sub(a.Heard)
}

// Stale is an agent silent for three heartbeat intervals.
func (a *Agent) Stale(now time.Time) bool {
	iv := a.Interval
	if iv <= 0 {
		iv = 5 * time.Second
	}
	return a.Heard.IsZero() || now.Sub(a.Heard) > 3*iv
}

// TaskAge is how long its oldest running task has run (0: none).
func (a *Agent) TaskAge(now time.Time) time.Duration {
	if len(a.Tasks) == 0 {
		return 0
	}
	return now.Sub(a.Tasks[0].Since)
}

// Failure is one failed task or rejected request, newest first in State.
type Failure struct {
	At     time.Time
	Agent  string
	Task   string
	Status string
	Why    string
}

// Bus is the bus as the dashboard last saw it.
type Bus struct {
	Connected  bool
	URL        string // redacted
	RTT        time.Duration
	Reconnects uint64
	Dead       uint64 // dead letters kept
	Pool       uint64 // pool tasks waiting or running
	// The task stream's nodes (a three-node bus: 3), how many of them are
	// current, and its leader; 0 replicas: not read.
	Replicas, Current int
	Leader            string
	Err               string // the last look's failure, if any
}

// Board is the board's progress.
type Board struct {
	Plans    int
	ByStatus map[string]int
	Err      string
}

// Total is every task on the board.
func (b Board) Total() int {
	n := 0
	for _, c := range b.ByStatus {
		n += c
	}
	return n
}

// Look is one periodic look at what the bus keeps; a nil field was not
// read this time (its last value stays).
type Look struct {
	Roster []string // the bus's roster: the flock's agents
	Status []operator.AgentStatus
	Queues map[string]uint64
	Board  *Board
	Bus    Bus
}

// State is everything the dashboard shows.
type State struct {
	Agents   map[string]*Agent
	Failures []Failure
	Bus      Bus
	Board    Board
	Seen     time.Time // the last thing heard or looked at

	// The flock's agents, once a look read them: only they have rows, and
	// what is heard of any other ID (an agent of an earlier deployment) is
	// ignored. Until then every agent heard has one.
	roster  roster.Roster
	budgets map[string]protocol.LedgerEntry // every ledger entry, for an agent the roster gains
}

// NewState is an empty dashboard.
func NewState() *State {
	return &State{Agents: map[string]*Agent{}, budgets: map[string]protocol.LedgerEntry{}}
}

// ours reports whether id may have a row: an agent of the roster, or any
// agent before the roster is known.
func (s *State) ours(id string) bool {
	return protocol.ValidAgentID(id) && (!s.roster.Known() || s.roster.Has(id))
}

func (s *State) agent(id string) *Agent {
	a := s.Agents[id]
	if a == nil {
		a = &Agent{ID: id}
		s.Agents[id] = a
	}
	return a
}

// Take applies one thing heard on the bus. The agent is the subject's (the
// bus vouches for it), never the body's.
func (s *State) Take(it operator.Item, now time.Time) {
	s.Seen = now
	if it.Kind == "dead" {
		s.Bus.Dead++
		return
	}
	if !s.ours(it.Agent) {
		return // not an agent's subject, or not an agent of the flock
	}
	switch it.Kind {
	case "heartbeat":
		var hb protocol.Heartbeat
		if json.Unmarshal(it.Data, &hb) != nil {
			return
		}
		s.agent(it.Agent).takeHeartbeat(hb, now)
	case "result":
		var r protocol.Result
		if json.Unmarshal(it.Data, &r) != nil {
			return
		}
		a := s.agent(it.Agent)
		a.Tasks = slices.DeleteFunc(slices.Clone(a.Tasks), func(t protocol.RunningTask) bool { return t.ID == r.TaskID })
		a.Completed++
		if !r.OK() {
			a.Failed++
			s.fail(Failure{At: now, Agent: it.Agent, Task: r.TaskID, Status: r.Status, Why: why(r)})
		}
	case "event":
		var e protocol.Event
		if json.Unmarshal(it.Data, &e) != nil {
			return
		}
		a := s.agent(it.Agent)
		switch e.Type {
		case protocol.EventDraining:
			a.State = protocol.StateDraining
		case protocol.EventStopped:
			a.State, a.Tasks = protocol.StateStopped, nil
		case protocol.EventReady:
			a.State = protocol.StateReady
		case protocol.EventBoardFailed:
			s.fail(Failure{At: now, Agent: it.Agent, Task: e.Ref, Status: "board failed", Why: e.Detail})
		case protocol.EventTaskRejected:
			s.fail(Failure{At: now, Agent: it.Agent, Task: e.Ref, Status: "rejected", Why: e.Detail})
		}
	}
}

// takeHeartbeat records what a heartbeat says, heard at heard.
func (a *Agent) takeHeartbeat(hb protocol.Heartbeat, heard time.Time) {
	a.State, a.Tasks, a.Board, a.Heard = hb.State, hb.Tasks, hb.Board, heard
	a.Interval = time.Duration(hb.IntervalMS) * time.Millisecond
	a.Completed, a.Failed = hb.Completed, hb.Failed
}

// why is a failed result's reason in a few words.
func why(r protocol.Result) string {
	switch {
	case r.Error != "":
		return r.Error
	case r.ExitCode != nil:
		return "exit " + itoa(int64(*r.ExitCode))
	}
	return r.Status
}

func (s *State) fail(f Failure) {
	s.Failures = append([]Failure{f}, s.Failures...)
	if len(s.Failures) > keepFailures {
		s.Failures = s.Failures[:keepFailures]
	}
}

// TakeBudget applies an agent's ledger entry as the gateway or the operator
// wrote it (an entry with no period: deleted).
func (s *State) TakeBudget(e protocol.LedgerEntry, now time.Time) {
	if !protocol.ValidAgentID(e.Agent) {
		return
	}
	s.Seen = now
	if s.budgets == nil {
		s.budgets = map[string]protocol.LedgerEntry{}
	}
	s.budgets[e.Agent] = e
	if s.ours(e.Agent) {
		s.agent(e.Agent).takeBudget(e)
	}
}

func (a *Agent) takeBudget(e protocol.LedgerEntry) {
	a.Spent, a.Limit, a.Budgeted = e.Spent, e.Limit(), !e.Updated.IsZero()
}

// setRoster keeps the rows of the roster's agents only, and gives each of
// them one (an agent never heard shows as silent).
func (s *State) setRoster(ids []string) {
	s.roster = roster.Of(ids)
	for id := range s.Agents {
		if !s.roster.Has(id) {
			delete(s.Agents, id)
		}
	}
	for _, id := range s.roster.IDs() {
		if s.Agents[id] == nil && protocol.ValidAgentID(id) {
			a := s.agent(id)
			if e, ok := s.budgets[id]; ok {
				a.takeBudget(e)
			}
		}
	}
}

// Apply takes a periodic look.
func (s *State) Apply(l Look, now time.Time) {
	s.Seen = now
	if l.Roster != nil {
		s.setRoster(l.Roster)
	}
	if l.Status != nil {
		for _, st := range l.Status {
			if !s.ours(st.ID) {
				continue
			}
			a := s.agent(st.ID)
			a.Known = st.InTopology
			if st.Last != nil && a.Heard.IsZero() {
				// A stored heartbeat: its own time, since none came live yet.
				a.takeHeartbeat(*st.Last, st.Last.Time)
			}
		}
	}
	if l.Queues != nil {
		for id, a := range s.Agents {
			q, ok := l.Queues[id]
			a.Queue, a.Known = q, ok
		}
		for id, q := range l.Queues {
			if s.Agents[id] == nil && s.ours(id) {
				a := s.agent(id)
				a.Queue, a.Known = q, true
			}
		}
	}
	if l.Board != nil {
		s.Board = *l.Board
	}
	dead := s.Bus.Dead
	s.Bus = l.Bus
	if l.Bus.Err != "" {
		s.Bus.Dead = dead
	}
}

// Sort keys, in the order the s key cycles through them.
var Sorts = []string{"agent", "state", "task", "heartbeat", "tokens", "failed"}

// Rows are the agents to show: those whose ID, state or task contains
// filter, sorted by key (agent ID breaks ties).
func (s *State) Rows(key, filter string, now time.Time) []*Agent {
	rows := make([]*Agent, 0, len(s.Agents))
	for _, a := range s.Agents {
		if filter == "" || strings.Contains(a.ID, filter) || strings.Contains(a.State, filter) || slices.ContainsFunc(a.Tasks, func(t protocol.RunningTask) bool { return strings.Contains(t.ID, filter) }) {
			rows = append(rows, a)
		}
	}
	slices.SortFunc(rows, func(x, y *Agent) int {
		c := 0
		switch key {
		case "state":
			c = strings.Compare(x.State, y.State)
		case "task": // the longest-running first
			c = -cmpDur(x.TaskAge(now), y.TaskAge(now))
		case "heartbeat": // the most silent first
			c = -cmpDur(x.HeartbeatAge(now), y.HeartbeatAge(now))
		case "tokens": // the biggest spender first
			c = -cmpInt(x.Spent, y.Spent)
		case "failed":
			c = -cmpInt(int64(x.Failed), int64(y.Failed))
		}
		if c == 0 {
			c = naturalCompare(x.ID, y.ID)
		}
		return c
	})
	return rows
}

// naturalCompare orders IDs as a person counts: agent-2 before agent-10.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmpInt(int64(len(na)), int64(len(nb))); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int64(a[0]), int64(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(int64(len(a)), int64(len(b)))
}

// digits is how many decimal digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func cmpDur(a, b time.Duration) int { return cmpInt(int64(a), int64(b)) }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
