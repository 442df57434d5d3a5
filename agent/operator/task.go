package operator

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// Target says where a task goes.
type Target struct {
	Agent string // tasks.<Agent>
	Pool  bool   // tasks.pool
	All   bool   // tasks.all
}

// Subject is the task subject of t.
func (t Target) Subject() (string, error) {
	n := 0
	for _, b := range []bool{t.Agent != "", t.Pool, t.All} {
		if b {
			n++
		}
	}
	if n != 1 {
		return "", errors.New("choose exactly one of an agent, the pool or all")
	}
	switch {
	case t.Pool:
		return protocol.SubjectTasksPool, nil
	case t.All:
		return protocol.SubjectTasksAll, nil
	}
	return protocol.TaskSubject(t.Agent), nil
}

// Agents lists the agents the bus routes tasks to: the durable consumers of
// the task stream other than the pool. tasks.all reaches exactly these.
func (c *Client) Agents(ctx context.Context) ([]string, error) {
	s, err := c.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", protocol.StreamTasks, err)
	}
	var ids []string
	names := s.ConsumerNames(ctx)
	for n := range names.Name() {
		if n != protocol.ConsumerPool {
			ids = append(ids, n)
		}
	}
	if err := names.Err(); err != nil {
		return nil, err
	}
	sort.Strings(ids)
	return ids, nil
}

// newNonce returns a task's secret: 128 random bits.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewTaskID returns a fresh task ID: t-<UTC time>-<random>.
func NewTaskID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "t-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// Run publishes task to target and waits for its results: one for an agent or
// the pool, one per agent for all (Agents at publish time). onResult, if set,
// sees each result as it arrives. When ctx ends first, Run returns what it
// has with ErrTimeout.
func (c *Client) Run(ctx context.Context, target Target, task protocol.Task, onResult func(protocol.Result)) ([]protocol.Result, error) {
	return c.RunChecked(ctx, target, task, onResult, nil)
}

// RunChecked is Run that reports forged results to onForged: results for the
// task (its sequence and subject) that do not echo its nonce, sent by an agent
// the bus never gave the task. They are ignored either way.
func (c *Client) RunChecked(ctx context.Context, target Target, task protocol.Task, onResult, onForged func(protocol.Result)) ([]protocol.Result, error) {
	subject, err := target.Subject()
	if err != nil {
		return nil, err
	}
	if task.ID == "" {
		task.ID = NewTaskID()
	}
	if task.V == 0 {
		task.V = protocol.Version
	}
	if task.Nonce == "" {
		task.Nonce = newNonce()
	}
	if err := task.Validate(); err != nil {
		return nil, err
	}
	want := map[string]bool{} // agents a result is awaited from ("" = any)
	switch {
	case target.Agent != "":
		err := c.untilAnswered(ctx, func(ctx context.Context) error {
			_, err := c.js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(target.Agent))
			return err
		})
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, fmt.Errorf("%w %q: the bus has no consumer for it", ErrUnknownAgent, target.Agent)
		}
		if err != nil {
			return nil, &NotStoredError{TaskID: task.ID, Err: err}
		}
		want[target.Agent] = true
	case target.All:
		ids, err := c.Agents(ctx)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, ErrNoAgents
		}
		for _, id := range ids {
			want[id] = true
		}
	default:
		want[""] = true
	}
	body, _ := json.Marshal(task)

	results := make(chan *nats.Msg, 1024)
	sub, err := c.nc.ChanSubscribe(protocol.SubjectResults, results)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := c.flush(ctx); err != nil {
		return nil, err
	}
	ack, err := c.publish(ctx, subject, task.ID, body)
	if err != nil {
		return nil, err
	}

	var out []protocol.Result
	for len(want) > 0 {
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("%w for %d result(s) of task %s (%s)", ErrTimeout, len(want), task.ID, strings.Join(keys(want), ", "))
		case rm := <-results:
			var r protocol.Result
			if json.Unmarshal(rm.Data, &r) != nil || r.Seq != ack.Sequence || r.Subject != subject {
				continue
			}
			// The server vouches for the sender: task.result.<agent>.
			r.Agent = strings.TrimPrefix(rm.Subject, "task.result.")
			if subtle.ConstantTimeCompare([]byte(r.Nonce), []byte(task.Nonce)) != 1 {
				if onForged != nil {
					onForged(r)
				}
				continue
			}
			key := r.Agent
			if want[""] {
				key = ""
			}
			if !want[key] {
				continue // a duplicate (redelivery) or an agent added after publishing
			}
			delete(want, key)
			out = append(out, r)
			if onResult != nil {
				onResult(r)
			}
		}
	}
	return out, nil
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		if k == "" {
			k = "pool"
		}
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
