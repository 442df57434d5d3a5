// Package mcpserver puts the flock's bus behind the Model Context Protocol,
// the way AI agent programs discover tools. Two servers:
//
//   - the agent's (NewAgent), started by an agent program inside its
//     container as `flock-agent mcp`: it acts with that agent's own bus key,
//     so it can do nothing the agent's bus permissions do not allow;
//   - the operator's (NewOperator), `flock-agent mcp --operator`, on the
//     operator's machine with the operator key.
//
// Bad tool input is a tool error (IsError) naming the field and the rule,
// never a crash or a protocol error.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/agent/mailbox"
	"github.com/ai-flock/ai-flock/agent/roster"
	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/protocol"
)

// AgentConfig is what the agent's server needs: who it is, where its
// directory is, and the task it was started by (if any).
type AgentConfig struct {
	ID          string // FLOCK_AGENT_ID
	AgentDir    string // <FLOCK_SHARED_DIR>/agents/<id>
	TaskID      string // FLOCK_TASK_ID ("" outside a task)
	TaskDir     string // FLOCK_TASK_DIR
	TaskAttempt string // FLOCK_TASK_ATTEMPT
	Version     string
}

// Limits of the agent's tools.
const (
	MaxWait      = 5 * time.Minute // read_inbox wait_seconds
	MaxMessages  = 100             // read_inbox max
	MaxBodyBytes = 64 << 10        // send body + data
	pollEvery    = 100 * time.Millisecond
)

// NewAgent returns the agent's MCP server on nc, a connection made with the
// agent's own key and reply-inbox prefix.
func NewAgent(nc *nats.Conn, cfg AgentConfig) *mcp.Server {
	a := &agentTools{nc: nc, cfg: cfg}
	s := mcp.NewServer(&mcp.Implementation{Name: "flock-agent", Title: "AI Flock agent " + cfg.ID, Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "You are agent " + cfg.ID + " of an AI Flock. Message your peers with send (the bus vouches for your name as the sender), " +
			"read what they sent you with read_inbox and take each message you have dealt with with inbox_ack (untaken messages stay; a sender with too many untaken is made to wait), see who is in your flock with roster, and read the task you were started for with task_context. " +
			"The board is the flock's shared task list: take a ready task with board_claim, keep its lease with board_renew, finish it with board_complete " +
			"or board_fail (or hand it back with board_release), split it with board_add, and see the tasks with board_list.",
	})
	mcp.AddTool(s, &mcp.Tool{Name: "send", Description: "Send a message to a peer agent's mailbox, as this agent. The receipt says delivered (the peer stored it: file) or queued (the peer is down or busy: the bus keeps it until the peer takes it)."}, a.send)
	mcp.AddTool(s, &mcp.Tool{Name: "read_inbox", Description: "Read messages in this agent's inbox (oldest first), after a cursor; optionally wait for one to arrive. The sender of each message is the one the bus vouched for."}, a.readInbox)
	mcp.AddTool(s, &mcp.Tool{Name: "inbox_ack", Description: "Take a message of this agent's inbox (by its id or file, as read_inbox gives them): it moves to inbox/taken/, where old ones are pruned. Untaken messages are never pruned, and a sender with 64 untaken messages here waits until some are taken."}, a.inboxAck)
	mcp.AddTool(s, &mcp.Tool{Name: "roster", Description: "The IDs of the agents in this flock (the names send accepts)."}, a.roster)
	mcp.AddTool(s, &mcp.Tool{Name: "task_context", Description: "The task this agent program was started for: its ID, directory, attempt and the task as the operator sent it."}, a.taskContext)
	addBoardAgentTools(s, board.NewAgentClient(nc, cfg.ID))
	return s
}

type agentTools struct {
	nc  *nats.Conn
	cfg AgentConfig
}

// SendIn is the send tool's input.
type SendIn struct {
	To   string `json:"to" jsonschema:"the ID of the receiving agent (see roster)"`
	Body string `json:"body,omitempty" jsonschema:"the message text"`
	Data any    `json:"data,omitempty" jsonschema:"optional structured data (any JSON value)"`
	ID   string `json:"id,omitempty" jsonschema:"optional message ID (default: generated)"`
	// WaitSeconds bounds how long to wait for delivery (default 10).
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the peer to take the message, in seconds (default 10, at most 300); past it the receipt says queued"`
}

func (a *agentTools) send(ctx context.Context, _ *mcp.CallToolRequest, in SendIn) (*mcp.CallToolResult, protocol.Receipt, error) {
	r, err := sendTool(ctx, in, func(ctx context.Context, msg protocol.Message, wait time.Duration) (protocol.Receipt, error) {
		return mailbox.Send(ctx, a.nc, a.cfg.ID, in.To, msg, wait)
	})
	return nil, r, err
}

// sendTool is both servers' send: it checks the input and hands the
// message to send with the wait for its delivery; the bus's answer that it
// queued the message is bounded by a wait of its own.
func sendTool(ctx context.Context, in SendIn, send func(context.Context, protocol.Message, time.Duration) (protocol.Receipt, error)) (protocol.Receipt, error) {
	data, err := rawData(in.Data)
	if err != nil {
		return protocol.Receipt{}, err
	}
	if err := checkSend(in.To, in.Body, data, in.ID, in.WaitSeconds); err != nil {
		return protocol.Receipt{}, err
	}
	wait := waitOr(in.WaitSeconds, 10*time.Second)
	ctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	defer cancel()
	msg := protocol.Message{ID: in.ID, Body: in.Body, Data: data}
	if msg.ID == "" {
		msg.ID = mailbox.NewID()
	}
	r, err := send(ctx, msg, wait)
	if errors.Is(err, context.DeadlineExceeded) {
		return r, fmt.Errorf("to: the bus did not queue the message to %s in time (sending it again with the same id stores it once)", in.To)
	}
	return r, err
}

// rawData encodes a tool's free-form data (tool schemas infer json.RawMessage
// as an array of bytes, so the tools take and give any).
func rawData(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	return b, nil
}

// anyOf decodes stored JSON for a tool's output (nil when absent or invalid).
func anyOf(b []byte) any {
	var v any
	if len(b) == 0 || json.Unmarshal(b, &v) != nil {
		return nil
	}
	return v
}

// checkSend validates a send's input; the error names the field.
func checkSend(to, body string, data json.RawMessage, id string, wait float64) error {
	var errs []error
	switch {
	case to == "":
		errs = append(errs, errors.New("to: required (an agent ID; see roster)"))
	case to != protocol.OperatorUser && !protocol.ValidAgentID(to):
		errs = append(errs, fmt.Errorf("to: %w", &protocol.AgentIDError{ID: to}))
	}
	if body == "" && len(data) == 0 {
		errs = append(errs, errors.New("body: give a body or data"))
	}
	if len(body)+len(data) > MaxBodyBytes {
		errs = append(errs, fmt.Errorf("body: body and data together must be at most %d bytes (got %d)", MaxBodyBytes, len(body)+len(data)))
	}
	if id != "" && !protocol.ValidTaskID(id) {
		errs = append(errs, fmt.Errorf("id: %q: 1 to 128 letters, digits, '.', '_' or '-'", id))
	}
	if err := checkWait("wait_seconds", wait); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkWait(field string, s float64) error {
	if s < 0 || s > MaxWait.Seconds() {
		return fmt.Errorf("%s: must be between 0 and %.0f (got %g)", field, MaxWait.Seconds(), s)
	}
	return nil
}

func waitOr(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// ReadInboxIn is the read_inbox tool's input.
type ReadInboxIn struct {
	After       string  `json:"after,omitempty" jsonschema:"cursor: return only messages after this one (the next of an earlier call); empty for the oldest kept"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"when there is nothing after the cursor, wait up to this long for a message (0: do not wait; at most 300)"`
	Max         int     `json:"max,omitempty" jsonschema:"at most this many messages (default 20, at most 100)"`
}

// InboxMessage is one stored message as the tools return it.
type InboxMessage struct {
	File     string    `json:"file"` // relative to the agent's directory
	Kind     string    `json:"kind"` // inbox | broadcast
	From     string    `json:"from"` // vouched for by the bus
	ID       string    `json:"id"`
	Received time.Time `json:"received"`
	Body     string    `json:"body,omitempty"`
	Data     any       `json:"data,omitempty"`
	Problem  string    `json:"problem,omitempty"`
}

// ReadInboxOut is the read_inbox tool's output.
type ReadInboxOut struct {
	Messages []InboxMessage `json:"messages"`
	Next     string         `json:"next"` // the cursor for the next call
}

func (a *agentTools) readInbox(ctx context.Context, _ *mcp.CallToolRequest, in ReadInboxIn) (*mcp.CallToolResult, ReadInboxOut, error) {
	var errs []error
	in.After = strings.TrimPrefix(in.After, "inbox/")
	if err := checkWait("wait_seconds", in.WaitSeconds); err != nil {
		errs = append(errs, err)
	}
	if in.Max < 0 || in.Max > MaxMessages {
		errs = append(errs, fmt.Errorf("max: must be between 1 and %d (got %d)", MaxMessages, in.Max))
	}
	if in.After != "" && (strings.ContainsAny(in.After, `/\`) || !strings.HasSuffix(in.After, ".json")) {
		errs = append(errs, fmt.Errorf("after: %q is not a cursor read_inbox returned", in.After))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, ReadInboxOut{}, err
	}
	if in.Max == 0 {
		in.Max = 20
	}
	deadline := time.Now().Add(waitOr(in.WaitSeconds, 0))
	dir := filepath.Join(a.cfg.AgentDir, "inbox")
	for {
		out, err := readInbox(dir, in.After, in.Max)
		if err != nil || len(out.Messages) > 0 || !time.Now().Before(deadline) {
			return nil, out, err
		}
		select {
		case <-ctx.Done():
			return nil, out, nil
		case <-time.After(pollEvery):
		}
	}
}

// readInbox returns up to max stored messages named after after, in order.
// The worker names inbox files by arrival time and a counter, so name order
// is arrival order; temporary files (.tmp) are skipped.
func readInbox(dir, after string, max int) (ReadInboxOut, error) {
	out := ReadInboxOut{Messages: []InboxMessage{}, Next: after}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		return out, fmt.Errorf("inbox: %w", err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") && n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if len(out.Messages) == max {
			break
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			continue // pruned meanwhile
		}
		var st worker.Stored
		if err := json.Unmarshal(b, &st); err != nil {
			continue
		}
		out.Messages = append(out.Messages, InboxMessage{
			File: filepath.Join("inbox", n), Kind: st.Kind, From: st.From, ID: st.Message.ID,
			Received: st.Received, Body: st.Message.Body, Data: anyOf(st.Message.Data), Problem: st.Problem,
		})
		out.Next = n
	}
	return out, nil
}

// InboxAckIn is the inbox_ack tool's input.
type InboxAckIn struct {
	ID string `json:"id" jsonschema:"the message to take: its id, or its file as read_inbox gives it (when two senders used the same id)"`
}

// InboxAckOut is the inbox_ack tool's output.
type InboxAckOut struct {
	File string `json:"file"` // where the taken message now is, relative to the agent's directory
}

func (a *agentTools) inboxAck(_ context.Context, _ *mcp.CallToolRequest, in InboxAckIn) (*mcp.CallToolResult, InboxAckOut, error) {
	file, err := worker.TakeMessage(filepath.Join(a.cfg.AgentDir, "inbox"), in.ID)
	return nil, InboxAckOut{File: file}, err
}

// RosterOut is the roster tool's output.
type RosterOut struct {
	Self   string   `json:"self"`
	Agents []string `json:"agents"`
}

func (a *agentTools) roster(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, RosterOut, error) {
	r, err := Roster(ctx, a.nc)
	return nil, RosterOut{Self: a.cfg.ID, Agents: r.Agents}, err
}

// Roster asks the bus for the flock's agent IDs.
func Roster(ctx context.Context, nc *nats.Conn) (protocol.Roster, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := roster.Ask(ctx, nc)
	return protocol.Roster{V: protocol.Version, Agents: r.IDs()}, err
}

// TaskContextOut is the task_context tool's output.
type TaskContextOut struct {
	Agent   string `json:"agent"`
	InTask  bool   `json:"in_task"` // false: not started by a task
	TaskID  string `json:"task_id,omitempty"`
	Dir     string `json:"dir,omitempty"`
	Attempt string `json:"attempt,omitempty"`
	Task    any    `json:"task,omitempty"` // task.json: the task as sent
}

func (a *agentTools) taskContext(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, TaskContextOut, error) {
	out := TaskContextOut{Agent: a.cfg.ID}
	if a.cfg.TaskID == "" || a.cfg.TaskDir == "" {
		return nil, out, nil
	}
	out.InTask, out.TaskID, out.Dir, out.Attempt = true, a.cfg.TaskID, a.cfg.TaskDir, a.cfg.TaskAttempt
	b, err := os.ReadFile(filepath.Join(a.cfg.TaskDir, "task.json"))
	if err != nil {
		return nil, out, fmt.Errorf("task: %w", err)
	}
	out.Task = anyOf(b)
	return nil, out, nil
}
