package bustest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// RecordedConn is a test connection that records the errors the server
// sends it out of band: its permission refusals.
type RecordedConn struct {
	*nats.Conn
	errs chan error
}

// ConnectRecorded is Connect, recording the server's refusals.
func (f *Bus) ConnectRecorded(tb testing.TB, user string) *RecordedConn {
	tb.Helper()
	c := &RecordedConn{errs: make(chan error, 64)}
	c.Conn = f.Connect(tb, user, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.errs <- err }))
	return c
}

// Denied asserts the server refused what (publish or subscription) on subject.
func (c *RecordedConn) Denied(tb testing.TB, what, subject string) {
	tb.Helper()
	_ = c.Flush()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), strings.ToLower(what)) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-timeout:
			tb.Fatalf("the server did not refuse %s on %q", what, subject)
		}
	}
}

// NoErrors asserts the server refuses nothing within the given time (a
// refusal arrives after the flush that sent what it refuses).
func (c *RecordedConn) NoErrors(tb testing.TB, within time.Duration) {
	tb.Helper()
	_ = c.Flush()
	select {
	case err := <-c.errs:
		tb.Fatalf("unexpected error: %v", err)
	case <-time.After(within):
	}
}
