package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// Limits of the operator's tools.
const (
	EventsKept    = 1000             // recent_events remembers this many
	MaxTaskWait   = 30 * time.Minute // run_task wait_seconds
	MaxDeadLetter = 100              // dead_letters max
	// broadcastWait is how long broadcast waits for every agent's receipt.
	broadcastWait = 5 * time.Second
)

// Operator is the operator's MCP server and the event log it keeps.
type Operator struct {
	*mcp.Server
	cl *operator.Client

	mu     sync.Mutex
	events []EventOut // the last EventsKept, oldest first
	seq    uint64
	more   chan struct{} // closed and replaced when an event arrives
}

// NewOperator returns the operator's MCP server on cl. It listens to the
// agents' events until ctx ends, so recent_events can answer.
func NewOperator(ctx context.Context, cl *operator.Client, version string) (*Operator, error) {
	o := &Operator{cl: cl, more: make(chan struct{})}
	o.Server = mcp.NewServer(&mcp.Implementation{Name: "flock-operator", Title: "AI Flock operator", Version: version}, &mcp.ServerOptions{
		Instructions: "You operate an AI Flock: run tasks on one agent, the pool (exactly one agent) or all agents and read their results; " +
			"list agents with their last heartbeat; message an agent (as the operator) or broadcast; read recent events and dead-lettered tasks; " +
			"read each agent's model spending against its budget (you cannot change budgets); write plans of tasks to the board, list, show, cancel and retry its tasks.",
	})
	mcp.AddTool(o.Server, &mcp.Tool{Name: "run_task", Description: "Run a command (or an echo task) on one agent, the pool or all agents, and return the results."}, o.runTask)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "list_agents", Description: "The flock's agents with their last heartbeat, pending and running tasks."}, o.listAgents)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "send", Description: "Put a message in an agent's mailbox, sent as the operator. The receipt says delivered (the agent stored it: file) or queued (the agent is down or busy: the bus keeps it until the agent takes it)."}, o.send)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "broadcast", Description: "Announce a message to every agent."}, o.broadcast)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "recent_events", Description: "Agents' lifecycle events seen since this server started (oldest first), after a cursor; optionally wait for one."}, o.recentEvents)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "dead_letters", Description: "Tasks the bus parked after their deliveries ran out, most recent last."}, o.deadLetters)
	mcp.AddTool(o.Server, &mcp.Tool{Name: "budgets", Description: "Each agent's model spending against its token budget (read-only: budgets are raised or reset by the human operator, on the CLI)."}, o.budgets)
	addBoardOperatorTools(o.Server, board.NewOperatorClient(cl.Conn()))

	started := make(chan error, 1)
	go func() {
		err := cl.WatchReady(ctx, func(it operator.Item) {
			if it.Kind == "event" {
				o.record(it)
			}
		}, func() { started <- nil })
		if err != nil {
			started <- err
		}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("listening to events: %w", err)
	}
	return o, nil
}

// EventOut is one event recent_events returns.
type EventOut struct {
	Seq    uint64    `json:"seq"` // cursor
	Agent  string    `json:"agent"`
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Ref    string    `json:"ref,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

func (o *Operator) record(it operator.Item) {
	var e protocol.Event
	if json.Unmarshal(it.Data, &e) != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	// The agent is the one the subject names, not what the body says.
	o.events = append(o.events, EventOut{Seq: o.seq, Agent: it.Agent, Time: e.Time, Type: e.Type, Ref: e.Ref, Detail: e.Detail})
	if len(o.events) > EventsKept {
		o.events = append([]EventOut(nil), o.events[len(o.events)-EventsKept:]...)
	}
	close(o.more)
	o.more = make(chan struct{})
}

// RunTaskIn is the run_task tool's input.
type RunTaskIn struct {
	Agent          string            `json:"agent,omitempty" jsonschema:"run on this agent (give exactly one of agent, pool, all)"`
	Pool           bool              `json:"pool,omitempty" jsonschema:"run on exactly one agent of the pool"`
	All            bool              `json:"all,omitempty" jsonschema:"run on every agent"`
	Kind           string            `json:"kind,omitempty" jsonschema:"exec (the default with a command) or echo"`
	Command        string            `json:"command,omitempty" jsonschema:"the program to run inside the agent"`
	Args           []string          `json:"args,omitempty" jsonschema:"its arguments (for echo: the words echoed)"`
	Stdin          string            `json:"stdin,omitempty"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for the task process"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"the task's timeout (default: the agent's)"`
	WaitSeconds    float64           `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the results (default: timeout + 30, or 330; at most 1800)"`
}

// RunTaskOut is the run_task tool's output.
type RunTaskOut struct {
	TaskID   string            `json:"task_id"`
	Complete bool              `json:"complete"` // every awaited result arrived
	Results  []protocol.Result `json:"results"`
	// Forged lists results that claimed the task without its nonce (an agent
	// the bus never gave it); they are not among Results.
	Forged []protocol.Result `json:"forged,omitempty"`
}

func (o *Operator) runTask(ctx context.Context, _ *mcp.CallToolRequest, in RunTaskIn) (*mcp.CallToolResult, RunTaskOut, error) {
	var errs []error
	target := operator.Target{Agent: in.Agent, Pool: in.Pool, All: in.All}
	if _, err := target.Subject(); err != nil {
		errs = append(errs, fmt.Errorf("agent: give exactly one of agent, pool or all"))
	} else if in.Agent != "" {
		if _, err := protocol.ParseAgentID(in.Agent); err != nil {
			errs = append(errs, fmt.Errorf("agent: %w", err))
		}
	}
	if in.TimeoutSeconds < 0 || in.TimeoutSeconds > protocol.MaxTaskTimeout.Seconds() {
		errs = append(errs, fmt.Errorf("timeout_seconds: must be between 0 and %.0f (got %g)", protocol.MaxTaskTimeout.Seconds(), in.TimeoutSeconds))
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > MaxTaskWait.Seconds() {
		errs = append(errs, fmt.Errorf("wait_seconds: must be between 0 and %.0f (got %g)", MaxTaskWait.Seconds(), in.WaitSeconds))
	}
	task := protocol.Task{V: protocol.Version, ID: operator.NewTaskID(), Kind: in.Kind, Command: in.Command, Args: in.Args,
		Stdin: in.Stdin, Env: in.Env, Timeout: protocol.Duration(time.Duration(in.TimeoutSeconds * float64(time.Second)))}
	if in.Kind == protocol.KindEcho && in.Command != "" {
		errs = append(errs, errors.New("command: an echo task takes args, not a command"))
	}
	if in.Kind == "" && in.Command == "" {
		errs = append(errs, errors.New("command: required (or kind: echo)"))
	}
	if len(errs) == 0 {
		if err := task.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, RunTaskOut{}, err
	}
	wait := 5*time.Minute + 30*time.Second
	if in.TimeoutSeconds > 0 {
		wait = time.Duration(in.TimeoutSeconds*float64(time.Second)) + 30*time.Second
	}
	if in.WaitSeconds > 0 {
		wait = time.Duration(in.WaitSeconds * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var forged []protocol.Result
	res, err := o.cl.RunChecked(ctx, target, task, nil, func(r protocol.Result) { forged = append(forged, r) })
	out := RunTaskOut{TaskID: task.ID, Results: res, Complete: err == nil, Forged: forged}
	if out.Results == nil {
		out.Results = []protocol.Result{}
	}
	if errors.Is(err, operator.ErrTimeout) {
		return nil, out, nil // what arrived, with complete: false
	}
	return nil, out, err
}

// ListAgentsOut is the list_agents tool's output.
type ListAgentsOut struct {
	Agents []operator.AgentStatus `json:"agents"`
}

func (o *Operator) listAgents(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ListAgentsOut, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	list, err := o.cl.Status(ctx, 5*time.Second)
	if list == nil {
		list = []operator.AgentStatus{}
	}
	return nil, ListAgentsOut{Agents: list}, err
}

func (o *Operator) send(ctx context.Context, _ *mcp.CallToolRequest, in SendIn) (*mcp.CallToolResult, protocol.Receipt, error) {
	r, err := sendTool(ctx, in, func(ctx context.Context, msg protocol.Message, wait time.Duration) (protocol.Receipt, error) {
		return o.cl.Send(ctx, in.To, msg, wait)
	})
	return nil, r, err
}

// BroadcastIn is the broadcast tool's input.
type BroadcastIn struct {
	Body string `json:"body,omitempty" jsonschema:"the announcement"`
	Data any    `json:"data,omitempty" jsonschema:"optional structured data"`
}

// BroadcastOut is the broadcast tool's output: who stored it, who refused
// it (and why), who did not answer in time.
type BroadcastOut struct {
	ID      string            `json:"id"`
	Stored  []string          `json:"stored"`
	Refused map[string]string `json:"refused,omitempty"`
	Missing []string          `json:"missing,omitempty"`
}

func (o *Operator) broadcast(ctx context.Context, _ *mcp.CallToolRequest, in BroadcastIn) (*mcp.CallToolResult, BroadcastOut, error) {
	data, err := rawData(in.Data)
	if err != nil {
		return nil, BroadcastOut{}, err
	}
	if in.Body == "" && len(data) == 0 {
		return nil, BroadcastOut{}, errors.New("body: give a body or data")
	}
	if len(in.Body)+len(data) > MaxBodyBytes {
		return nil, BroadcastOut{}, fmt.Errorf("body: body and data together must be at most %d bytes", MaxBodyBytes)
	}
	msg := protocol.Message{ID: mailbox.NewID(), Body: in.Body, Data: data}
	ctx, cancel := context.WithTimeout(ctx, broadcastWait)
	defer cancel()
	receipts, missing, err := o.cl.Broadcast(ctx, msg)
	if err != nil {
		return nil, BroadcastOut{}, err
	}
	out := BroadcastOut{ID: msg.ID, Stored: []string{}, Missing: missing}
	for _, r := range receipts {
		if r.Error != "" {
			if out.Refused == nil {
				out.Refused = map[string]string{}
			}
			out.Refused[r.To] = r.Error
			continue
		}
		out.Stored = append(out.Stored, r.To)
	}
	sort.Strings(out.Stored)
	return nil, out, nil
}

// RecentEventsIn is the recent_events tool's input.
type RecentEventsIn struct {
	After       uint64  `json:"after,omitempty" jsonschema:"cursor: only events after this seq (the next of an earlier call)"`
	Agent       string  `json:"agent,omitempty" jsonschema:"only this agent's events"`
	Type        string  `json:"type,omitempty" jsonschema:"only events of this type (started, ready, inbox, task.rejected, ...)"`
	Max         int     `json:"max,omitempty" jsonschema:"at most this many (default 50, at most 1000)"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"when none match, wait up to this long for one (at most 300)"`
}

// RecentEventsOut is the recent_events tool's output.
type RecentEventsOut struct {
	Events []EventOut `json:"events"`
	Next   uint64     `json:"next"`
}

func (o *Operator) recentEvents(ctx context.Context, _ *mcp.CallToolRequest, in RecentEventsIn) (*mcp.CallToolResult, RecentEventsOut, error) {
	var errs []error
	if in.Max < 0 || in.Max > EventsKept {
		errs = append(errs, fmt.Errorf("max: must be between 1 and %d (got %d)", EventsKept, in.Max))
	}
	if in.Agent != "" {
		if _, err := protocol.ParseAgentID(in.Agent); err != nil {
			errs = append(errs, fmt.Errorf("agent: %w", err))
		}
	}
	if err := checkWait("wait_seconds", in.WaitSeconds); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, RecentEventsOut{}, err
	}
	if in.Max == 0 {
		in.Max = 50
	}
	timer := time.NewTimer(waitOr(in.WaitSeconds, 0))
	defer timer.Stop()
	for {
		o.mu.Lock()
		out := RecentEventsOut{Events: []EventOut{}, Next: in.After}
		for _, e := range o.events {
			if e.Seq <= in.After || (in.Agent != "" && e.Agent != in.Agent) || (in.Type != "" && e.Type != in.Type) {
				continue
			}
			if len(out.Events) == in.Max {
				break
			}
			out.Events = append(out.Events, e)
			out.Next = e.Seq
		}
		if len(out.Events) == 0 && o.seq > out.Next {
			out.Next = o.seq // nothing matched: skip what was looked at
		}
		more := o.more
		o.mu.Unlock()
		if len(out.Events) > 0 || in.WaitSeconds <= 0 {
			return nil, out, nil
		}
		in.After = out.Next
		select {
		case <-more:
		case <-timer.C:
			return nil, out, nil
		case <-ctx.Done():
			return nil, out, nil
		}
	}
}

// DeadLettersIn is the dead_letters tool's input.
type DeadLettersIn struct {
	Max int `json:"max,omitempty" jsonschema:"at most this many, the most recent (default 20, at most 100)"`
}

// DeadLetter is one parked task.
type DeadLetter struct {
	Seq     uint64            `json:"seq"`
	Subject string            `json:"subject"`
	Time    time.Time         `json:"time"`
	Reason  string            `json:"reason,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Task    string            `json:"task"` // the task's body as it was sent
}

// DeadLettersOut is the dead_letters tool's output.
type DeadLettersOut struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
}

func (o *Operator) deadLetters(ctx context.Context, _ *mcp.CallToolRequest, in DeadLettersIn) (*mcp.CallToolResult, DeadLettersOut, error) {
	if in.Max < 0 || in.Max > MaxDeadLetter {
		return nil, DeadLettersOut{}, fmt.Errorf("max: must be between 1 and %d (got %d)", MaxDeadLetter, in.Max)
	}
	if in.Max == 0 {
		in.Max = 20
	}
	msgs, err := o.cl.DeadLetters(ctx, in.Max)
	out := DeadLettersOut{DeadLetters: []DeadLetter{}}
	for _, m := range msgs {
		d := DeadLetter{Seq: m.Sequence, Subject: m.Subject, Time: m.Time, Reason: m.Header.Get(protocol.HeaderDeadReason), Headers: map[string]string{}, Task: string(m.Data)}
		keys := make([]string, 0, len(m.Header))
		for k := range m.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.Headers[k] = strings.Join(m.Header.Values(k), ", ")
		}
		out.DeadLetters = append(out.DeadLetters, d)
	}
	return nil, out, err
}

// BudgetsIn is the budgets tool's input: none.
type BudgetsIn struct{}

// BudgetOut is one agent's spending as the budgets tool reports it.
type BudgetOut struct {
	Agent  string `json:"agent"`
	Spent  int64  `json:"spent"`           // tokens, with the bounds of calls in flight
	Limit  int64  `json:"limit,omitempty"` // budget and raises; absent: no cap
	Left   int64  `json:"left"`
	Window string `json:"window,omitempty"` // day or month; absent: never starts over
	Period string `json:"period,omitempty"`
	// StartsOver is when the window starts over.
	StartsOver *time.Time `json:"starts_over,omitempty"`
}

// BudgetsOut is the budgets tool's output.
type BudgetsOut struct {
	Budgets []BudgetOut `json:"budgets"`
}

// budgets reads the gateway's ledger. It is the only budget tool: raising
// or resetting a budget is the human operator's, on the CLI.
func (o *Operator) budgets(ctx context.Context, _ *mcp.CallToolRequest, _ BudgetsIn) (*mcp.CallToolResult, BudgetsOut, error) {
	all, err := o.cl.Budgets(ctx)
	out := BudgetsOut{Budgets: []BudgetOut{}}
	for _, e := range all {
		b := BudgetOut{Agent: e.Agent, Spent: e.Spent, Limit: e.Limit(), Left: e.Left(), Window: e.Window, Period: e.Period}
		if !e.Reset.IsZero() {
			r := e.Reset
			b.StartsOver = &r
		}
		out.Budgets = append(out.Budgets, b)
	}
	return nil, out, err
}
