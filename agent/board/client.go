package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// Client asks the board service: as an agent (its own request subjects) or
// as the operator. The bus, not the client, makes the caller's identity
// certain: an agent's connection may publish only on its own subjects.
type Client struct {
	nc *nats.Conn
	as string // an agent's ID, or protocol.OperatorUser
}

// NewAgentClient asks as agent id.
func NewAgentClient(nc *nats.Conn, id string) *Client { return &Client{nc: nc, as: id} }

// NewOperatorClient asks as the operator.
func NewOperatorClient(nc *nats.Conn) *Client { return &Client{nc: nc, as: protocol.OperatorUser} }

func (c *Client) subject(op string) string {
	if c.as == protocol.OperatorUser {
		return protocol.BoardOperatorSubject(op)
	}
	return protocol.BoardAgentSubject(c.as, op)
}

// Do sends one request and returns the reply; a refusal is a
// *protocol.BoardError. A caller past its request rate or its requests in
// flight (protocol.BoardErrBusy) is refused before the board is asked:
// Do asks again after a pause that doubles (busyPause to busyPauseMax)
// while ctx lasts, and returns the refusal when it ends.
func (c *Client) Do(ctx context.Context, op string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	req.V = protocol.Version
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	pause := busyPause
	for {
		rep, err := c.ask(ctx, op, body)
		var be *protocol.BoardError
		if !errors.As(err, &be) || be.Code != protocol.BoardErrBusy {
			return rep, err
		}
		wait := pause/2 + rand.N(pause/2+1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, err
		case <-time.After(wait):
		}
		pause = min(2*pause, busyPauseMax)
	}
}

// The pauses of a request refused as busy.
const (
	busyPause    = 100 * time.Millisecond
	busyPauseMax = 2 * time.Second
)

func (c *Client) ask(ctx context.Context, op string, body []byte) (*protocol.BoardReply, error) {
	msg, err := c.nc.RequestWithContext(ctx, c.subject(op), body)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("board %s: no board service answers (is the bus up?): %w", op, err)
		}
		return nil, fmt.Errorf("board %s: %w", op, err)
	}
	var rep protocol.BoardReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return nil, fmt.Errorf("board %s: unreadable reply: %w", op, err)
	}
	if rep.Error != "" {
		return &rep, &protocol.BoardError{Code: rep.Code, Msg: rep.Error}
	}
	return &rep, nil
}

// Claim takes a ready task the caller may take (of kind, "" for any; of
// plan/task when given). A *protocol.BoardError with code
// protocol.BoardErrNothing means nothing is ready for it.
func (c *Client) Claim(ctx context.Context, plan, task, kind string) (*protocol.BoardReply, error) {
	return c.Do(ctx, protocol.BoardOpClaim, protocol.BoardRequest{Plan: plan, Task: task, Kind: kind})
}

// Renew extends the lease on a task the caller holds.
func (c *Client) Renew(ctx context.Context, plan, task string) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpRenew, protocol.BoardRequest{Plan: plan, Task: task}))
}

// RenewAll renews every claim the agent holds (of kind, when not empty):
// the reply's Tasks are those renewed, its Lease the board's lease.
func (c *Client) RenewAll(ctx context.Context, kind string) (*protocol.BoardReply, error) {
	return c.Do(ctx, protocol.BoardOpRenewAll, protocol.BoardRequest{Kind: kind})
}

// Abandon gives back every claim the agent holds, each attempt counted:
// what a runtime does when it starts. The reply's Tasks are those given
// back.
func (c *Client) Abandon(ctx context.Context) (*protocol.BoardReply, error) {
	return c.Do(ctx, protocol.BoardOpAbandon, protocol.BoardRequest{})
}

// Complete marks a held task done with its result.
func (c *Client) Complete(ctx context.Context, plan, task string, res protocol.BoardResult) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpComplete, protocol.BoardRequest{Plan: plan, Task: task, Result: &res}))
}

// Fail marks a held task failed.
func (c *Client) Fail(ctx context.Context, plan, task, reason string, res *protocol.BoardResult) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpFail, protocol.BoardRequest{Plan: plan, Task: task, Reason: reason, Result: res}))
}

// Release hands a held task back to the board.
func (c *Client) Release(ctx context.Context, plan, task, reason string) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpRelease, protocol.BoardRequest{Plan: plan, Task: task, Reason: reason}))
}

// Add adds a subtask under a task the caller holds.
func (c *Client) Add(ctx context.Context, plan, under string, spec protocol.BoardTaskSpec) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpAdd, protocol.BoardRequest{Plan: plan, Task: under, Tasks: []protocol.BoardTaskSpec{spec}}))
}

// List returns the tasks the caller may see (of plan when given, of the
// statuses when given), every page of them.
func (c *Client) List(ctx context.Context, plan string, status ...string) ([]protocol.BoardTask, error) {
	var tasks []protocol.BoardTask
	req := protocol.BoardRequest{Plan: plan, Status: status}
	for {
		rep, err := c.Do(ctx, protocol.BoardOpList, req)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, rep.Tasks...)
		if rep.Next == "" || rep.Next == req.After {
			return tasks, nil
		}
		req.After = rep.Next
	}
}

// Show returns one task.
func (c *Client) Show(ctx context.Context, plan, task string) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpShow, protocol.BoardRequest{Plan: plan, Task: task}))
}

// Apply writes a plan (operator only).
func (c *Client) Apply(ctx context.Context, p protocol.BoardPlan) ([]protocol.BoardChange, error) {
	rep, err := c.Do(ctx, protocol.BoardOpApply, protocol.BoardRequest{Plan: p.Plan, Tasks: p.Tasks})
	if err != nil {
		return nil, err
	}
	return rep.Changes, nil
}

// DryRun is Apply's checks and the changes it would make, written nowhere
// (operator only). When the apply would be refused, the refusal comes with
// the changes (the tasks it would not adopt as protocol.BoardRefused).
func (c *Client) DryRun(ctx context.Context, p protocol.BoardPlan) ([]protocol.BoardChange, error) {
	rep, err := c.Do(ctx, protocol.BoardOpDryRun, protocol.BoardRequest{Plan: p.Plan, Tasks: p.Tasks})
	if rep == nil {
		return nil, err
	}
	return rep.Changes, err
}

// Remove deletes every task of a finished plan from the board (operator
// only); a plan with a task not finished is refused.
func (c *Client) Remove(ctx context.Context, plan string) ([]protocol.BoardChange, error) {
	rep, err := c.Do(ctx, protocol.BoardOpRemove, protocol.BoardRequest{Plan: plan})
	if err != nil {
		return nil, err
	}
	return rep.Changes, nil
}

// Put stores data as artifact name of a task the caller holds (agents only).
func (c *Client) Put(ctx context.Context, plan, task, name string, data []byte) (*protocol.BoardArtifact, error) {
	rep, err := c.Do(ctx, protocol.BoardOpPut, protocol.BoardRequest{Plan: plan, Task: task, Name: name, Data: data})
	if err != nil {
		return nil, err
	}
	return rep.Artifact, nil
}

// Get returns artifact name of a task: the operator any; an agent one it
// put, or one of a task its held task needs.
func (c *Client) Get(ctx context.Context, plan, task, name string) ([]byte, *protocol.BoardArtifact, error) {
	rep, err := c.Do(ctx, protocol.BoardOpGet, protocol.BoardRequest{Plan: plan, Task: task, Name: name})
	if err != nil {
		return nil, nil, err
	}
	return rep.Data, rep.Artifact, nil
}

// Cancel cancels a task that is not done (operator only).
func (c *Client) Cancel(ctx context.Context, plan, task, reason string) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpCancel, protocol.BoardRequest{Plan: plan, Task: task, Reason: reason}))
}

// Retry puts a failed or cancelled task back, its attempts reset (operator only).
func (c *Client) Retry(ctx context.Context, plan, task string) (*protocol.BoardTask, error) {
	return taskOf(c.Do(ctx, protocol.BoardOpRetry, protocol.BoardRequest{Plan: plan, Task: task}))
}

func taskOf(rep *protocol.BoardReply, err error) (*protocol.BoardTask, error) {
	if err != nil {
		return nil, err
	}
	if rep.Task == nil {
		return nil, fmt.Errorf("board: reply without a task")
	}
	return rep.Task, nil
}
