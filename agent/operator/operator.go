// Package operator is the operator's side of the bus: publish a task to one
// agent, the pool or every agent and wait for the results; send inbox
// messages and broadcasts; watch heartbeats, events, results and dead
// letters; list the agents with their last heartbeat.
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

// Errors the CLI maps to exit codes.
var (
	ErrUnknownAgent = errors.New("unknown agent")
	ErrNoAgents     = errors.New("no agents")
	ErrTimeout      = errors.New("timed out waiting")
)

// Client is an operator connection.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// Connect dials the bus as the operator with cred (a zero Credential: none).
func Connect(url string, cred Credential, opts ...nats.Option) (*Client, error) {
	all := []nats.Option{
		nats.Name("flock-operator"),
		nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.OperatorInboxToken)),
		nats.Timeout(3 * time.Second),
	}
	nk, err := cred.option()
	if err != nil {
		return nil, err
	}
	if nk != nil {
		all = append(all, nk)
	}
	nc, err := nats.Connect(url, append(all, opts...)...)
	if err != nil {
		return nil, err
	}
	cl, err := New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return cl, nil
}

// New wraps an existing connection (it must use the operator's inbox prefix).
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// Close closes the connection.
func (c *Client) Close() { c.nc.Close() }

// Conn is the operator's connection, for clients of other services on the
// bus (the board's).
func (c *Client) Conn() *nats.Conn { return c.nc }

// JetStream is the operator's JetStream context (the audit trail's reader
// uses it).
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// flush waits for the server to have processed everything sent so far.
func (c *Client) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	return c.nc.FlushWithContext(ctx)
}
