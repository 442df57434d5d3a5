package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// NotStoredError says a task was not stored by the bus, so nothing will run
// it: the bus refused it or never acknowledged it (a clustered bus without a
// quorum, a bus that is down). Sending it again is safe: its message ID
// makes a copy the bus did store after all a no-op.
type NotStoredError struct {
	TaskID string
	Err    error
}

func (e *NotStoredError) Error() string {
	return fmt.Sprintf("task %s was not stored by the bus, nothing will run it: %v", e.TaskID, e.Err)
}

func (e *NotStoredError) Unwrap() error { return e.Err }

// publishTries bounds how long Run tries to have a task stored: long enough
// for a clustered bus to elect a new stream leader after losing a node
// (a second or two), short enough to say soon that it has no quorum.
const publishTries = 15 * time.Second

// publish stores a task, trying again with the same message ID (the bus
// keeps one copy) while the bus does not acknowledge it.
func (c *Client) publish(ctx context.Context, subject, id string, body []byte) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	tries := 0
	tp, parent := traceOf(ctx)
	trace := tp.String() // the same on every try
	err := c.untilAnswered(ctx, func(ctx context.Context) error {
		m := nats.NewMsg(subject)
		m.Data = body
		m.Header.Set(nats.MsgIdHdr, id)
		m.Header.Set(protocol.HeaderTraceparent, trace)
		if parent != "" {
			m.Header.Set(protocol.HeaderParentSpan, parent)
		}
		var err error
		tries++
		ack, err = c.js.PublishMsg(ctx, m)
		return err
	})
	if err != nil {
		return nil, &NotStoredError{TaskID: id, Err: fmt.Errorf("on %s: %w", subject, err)}
	}
	// A duplicate on the first try is another task's ID (a later try's is
	// this one's earlier copy, whose answer was lost): the bus kept that
	// task, and waiting for this one's result would only time out.
	if ack.Duplicate && tries == 1 {
		return nil, &protocol.FieldError{Field: "id", Problem: fmt.Sprintf("%q is the ID of a task sent in the last %s: the bus kept that one and will not run this one; give another ID", id, protocol.TaskDuplicateWindow)}
	}
	return ack, nil
}

// untilAnswered runs call, each try bounded to 3 s, again while its error is
// transient, for at most publishTries (or until ctx ends): a bus without a
// quorum answers nothing at all, and a caller must hear so in seconds.
func (c *Client) untilAnswered(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, publishTries)
	defer cancel()
	for {
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		err := call(tctx)
		tcancel()
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer from the bus for %s: %w", publishTries, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// transient reports whether a publish may succeed if sent again: no answer,
// no quorum (503), or an earlier copy still being stored by a cluster that
// lost its leader (10158, duplicate message ID in process).
func transient(err error) bool {
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return false
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return true // a timeout, no responders, a lost connection
	}
	return apiErr.Code == 503 || apiErr.ErrorCode == 10158
}

type traceKey struct{}

// WithTrace makes the tasks published with ctx spans of tp's trace (a
// caller that is itself traced: the CLI reads TRACEPARENT).
func WithTrace(ctx context.Context, tp protocol.TraceParent) context.Context {
	return context.WithValue(ctx, traceKey{}, tp)
}

// traceOf is the task's span, a child of the caller's trace (and the
// caller's span ID, its parent), or the root of a new one (and "").
func traceOf(ctx context.Context) (protocol.TraceParent, string) {
	if tp, ok := ctx.Value(traceKey{}).(protocol.TraceParent); ok {
		return tp.Child(), tp.SpanHex()
	}
	return protocol.NewTrace(), ""
}
