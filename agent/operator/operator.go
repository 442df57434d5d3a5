// Package operator is the operator's side of the bus: publish a task to one
// agent, the pool or every agent and wait for the results; send inbox
// messages and broadcasts; watch heartbeats, events, results and dead
// letters; list the agents with their last heartbeat.
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
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/mailbox"
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

// Credential is the operator's nkey: a seed file (Docker hosts: make
// operator-key writes one), or the seed itself (the aws operator task gets it
// from Secrets Manager in its environment). At most one of the two.
type Credential struct {
	File string
	Seed string
}

func (c Credential) option() (nats.Option, error) {
	switch {
	case c.File != "" && c.Seed != "":
		return nil, errors.New("nkey: give either a seed file or a seed, not both")
	case c.File != "":
		nk, err := nats.NkeyOptionFromSeed(c.File)
		if err != nil {
			return nil, fmt.Errorf("nkey %s: %w", c.File, err)
		}
		return nk, nil
	case c.Seed != "":
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(c.Seed)))
		if err != nil {
			return nil, fmt.Errorf("nkey seed: %w", err) // never the seed itself
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nkey seed: %w", err)
		}
		return nats.Nkey(pub, kp.Sign), nil
	}
	return nil, nil
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
	err := c.untilAnswered(ctx, func(ctx context.Context) error {
		m := nats.NewMsg(subject)
		m.Data = body
		m.Header.Set(nats.MsgIdHdr, id)
		var err error
		ack, err = c.js.PublishMsg(ctx, m)
		return err
	})
	if err != nil {
		return nil, &NotStoredError{TaskID: id, Err: fmt.Errorf("on %s: %w", subject, err)}
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

// Send puts msg in agent to's inbox as the operator, waits for the agent's
// receipt and returns the file the message was stored in.
func (c *Client) Send(ctx context.Context, to string, msg protocol.Message) (string, error) {
	r, err := mailbox.Send(ctx, c.nc, protocol.OperatorUser, to, msg)
	if errors.Is(err, context.DeadlineExceeded) {
		return "", fmt.Errorf("%w for %s to confirm the message", ErrTimeout, to)
	}
	return r.File, err
}

// Broadcast sends msg to every agent (they record the operator as its
// sender) and gathers their receipts until every agent of the roster has
// answered or ctx ends. It returns the receipts, stored or refused, and the
// agents that did not answer.
func (c *Client) Broadcast(ctx context.Context, msg protocol.Message) ([]protocol.Receipt, []string, error) {
	if msg.ID == "" {
		msg.ID = mailbox.NewID()
	}
	if msg.V == 0 {
		msg.V = protocol.Version
	}
	if msg.Time.IsZero() {
		msg.Time = time.Now().UTC()
	}
	msg.From = protocol.OperatorUser
	b, err := protocol.Encode(msg, false)
	if err != nil {
		return nil, nil, err
	}
	roster, err := c.Roster(ctx)
	if err != nil {
		return nil, nil, err
	}
	inbox := c.nc.NewRespInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil, err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(protocol.SubjectBroadcast, inbox, b); err != nil {
		return nil, nil, err
	}
	waiting := map[string]bool{}
	for _, id := range roster {
		waiting[id] = true
	}
	var receipts []protocol.Receipt
	for len(waiting) > 0 {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // ctx ended: the rest did not answer
		}
		var r protocol.Receipt
		if json.Unmarshal(m.Data, &r) != nil || !waiting[r.To] {
			continue
		}
		delete(waiting, r.To)
		receipts = append(receipts, r)
	}
	missing := make([]string, 0, len(waiting))
	for id := range waiting {
		missing = append(missing, id)
	}
	sort.Strings(missing)
	return receipts, missing, nil
}

// Roster asks the bus for the flock's agent IDs.
func (c *Client) Roster(ctx context.Context) ([]string, error) {
	m, err := c.nc.RequestWithContext(ctx, protocol.SubjectRoster, nil)
	if err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	var r protocol.Roster
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return nil, fmt.Errorf("roster: %w", err)
	}
	return r.Agents, nil
}

// Item is one thing Watch saw.
type Item struct {
	Kind    string          // heartbeat, event, result, dead
	Subject string          // the NATS subject
	Agent   string          // from the subject (the server vouches for it)
	Data    json.RawMessage // the body
	Header  nats.Header     // dead letters carry the reason here
}

// Watch calls fn for every heartbeat, event, result and dead letter until ctx ends.
func (c *Client) Watch(ctx context.Context, fn func(Item)) error { return c.WatchReady(ctx, fn, nil) }

// WatchReady is Watch that calls ready (if set) once the bus has the
// subscriptions: nothing published after that is missed.
func (c *Client) WatchReady(ctx context.Context, fn func(Item), ready func()) error {
	ch := make(chan *nats.Msg, 4096)
	for _, s := range []string{protocol.SubjectHeartbeats, protocol.SubjectEvents, protocol.SubjectResults, protocol.SubjectDead} {
		sub, err := c.nc.ChanSubscribe(s, ch)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			fn(classify(m))
		}
	}
}

func classify(m *nats.Msg) Item {
	it := Item{Subject: m.Subject, Data: m.Data, Header: m.Header}
	parts := strings.Split(m.Subject, ".")
	switch {
	case strings.HasPrefix(m.Subject, "task.result."):
		it.Kind, it.Agent = "result", strings.TrimPrefix(m.Subject, "task.result.")
	case strings.HasPrefix(m.Subject, "deadletter."):
		it.Kind = "dead"
	case len(parts) == 3 && parts[2] == "heartbeat":
		it.Kind, it.Agent = "heartbeat", parts[1]
	case len(parts) == 3 && parts[2] == "events":
		it.Kind, it.Agent = "event", parts[1]
	}
	return it
}

// AgentStatus is one line of `agents`.
type AgentStatus struct {
	ID         string              `json:"id"`
	InTopology bool                `json:"in_topology"` // the bus has a consumer for it
	Pending    uint64              `json:"pending"`     // tasks waiting for it
	Running    int                 `json:"running"`     // tasks delivered and not yet acked
	Waiting    int                 `json:"waiting"`     // pull requests open now: it is listening
	Last       *protocol.Heartbeat `json:"last_heartbeat,omitempty"`
	Age        string              `json:"age,omitempty"` // since the last heartbeat
	Stale      bool                `json:"stale"`         // no heartbeat for three intervals
}

// Status lists the agents: every agent consumer of the task stream and every
// agent with a stored heartbeat (FLOCK_STATUS keeps the last one of each).
// Without that stream it listens to live heartbeats for listen.
func (c *Client) Status(ctx context.Context, listen time.Duration) ([]AgentStatus, error) {
	ids, err := c.Agents(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*AgentStatus{}
	for _, id := range ids {
		st := &AgentStatus{ID: id, InTopology: true}
		if cons, err := c.js.Consumer(ctx, protocol.StreamTasks, protocol.AgentConsumer(id)); err == nil {
			info := cons.CachedInfo()
			st.Pending, st.Running, st.Waiting = info.NumPending, info.NumAckPending, info.NumWaiting
		}
		byID[id] = st
	}
	hbs, err := c.lastHeartbeats(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		hbs, err = c.listenHeartbeats(ctx, listen)
	}
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, hb := range hbs {
		st := byID[hb.Agent]
		if st == nil {
			st = &AgentStatus{ID: hb.Agent}
			byID[hb.Agent] = st
		}
		st.Last = hb
		age := now.Sub(hb.Time)
		st.Age = age.Round(time.Second).String()
		interval := time.Duration(hb.IntervalMS) * time.Millisecond
		st.Stale = hb.State == protocol.StateStopped || (interval > 0 && age > 3*interval)
	}
	out := make([]AgentStatus, 0, len(byID))
	for _, st := range byID {
		if st.Last == nil {
			st.Stale = true
		}
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (c *Client) lastHeartbeats(ctx context.Context) ([]*protocol.Heartbeat, error) {
	s, err := c.js.Stream(ctx, protocol.StreamStatus)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectHeartbeats))
	if err != nil {
		return nil, err
	}
	var out []*protocol.Heartbeat
	for subj := range info.State.Subjects {
		m, err := s.GetLastMsgForSubject(ctx, subj)
		if err != nil {
			continue
		}
		var hb protocol.Heartbeat
		if json.Unmarshal(m.Data, &hb) != nil {
			continue
		}
		hb.Agent = strings.TrimSuffix(strings.TrimPrefix(subj, "agent."), ".heartbeat") // the server vouches for the subject
		out = append(out, &hb)
	}
	return out, nil
}

func (c *Client) listenHeartbeats(ctx context.Context, d time.Duration) ([]*protocol.Heartbeat, error) {
	ch := make(chan *nats.Msg, 1024)
	sub, err := c.nc.ChanSubscribe(protocol.SubjectHeartbeats, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	last := map[string]*protocol.Heartbeat{}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			var out []*protocol.Heartbeat
			for _, hb := range last {
				out = append(out, hb)
			}
			return out, nil
		case m := <-ch:
			var hb protocol.Heartbeat
			if json.Unmarshal(m.Data, &hb) == nil {
				hb.Agent = strings.Split(m.Subject, ".")[1]
				last[hb.Agent] = &hb
			}
		}
	}
}

// DeadLetters returns the parked tasks (most recent last), at most n.
func (c *Client) DeadLetters(ctx context.Context, n int) ([]jetstream.RawStreamMsg, error) {
	s, err := c.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []*jetstream.RawStreamMsg
	first := info.State.FirstSeq
	if info.State.LastSeq >= uint64(n) && info.State.LastSeq-uint64(n)+1 > first {
		first = info.State.LastSeq - uint64(n) + 1
	}
	for seq := first; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	res := make([]jetstream.RawStreamMsg, len(out))
	for i, m := range out {
		res[i] = *m
	}
	return res, nil
}

// flush waits for the server to have processed everything sent so far.
func (c *Client) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	return c.nc.FlushWithContext(ctx)
}

// StoredResults reads every result the bus keeps (each agent's results
// stream), stored at or after since (the zero time: all), in stream order
// per agent, agents in name order. The agent is the one its stream's
// subject names.
func (c *Client) StoredResults(ctx context.Context, since time.Time) ([]protocol.Result, error) {
	var streams []string
	names := c.js.StreamNames(ctx, jetstream.WithStreamListSubject(protocol.SubjectResults))
	for n := range names.Name() {
		if strings.HasPrefix(n, protocol.ResultsStream("")) {
			streams = append(streams, n)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list results streams: %w", err)
	}
	sort.Strings(streams)
	var out []protocol.Result
	for _, name := range streams {
		cfg := jetstream.OrderedConsumerConfig{}
		if !since.IsZero() {
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
		}
		cons, err := c.js.OrderedConsumer(ctx, name, cfg)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		for {
			batch, err := cons.Fetch(500, jetstream.FetchMaxWait(300*time.Millisecond))
			if err != nil {
				return out, fmt.Errorf("%s: %w", name, err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				var r protocol.Result
				if json.Unmarshal(m.Data(), &r) != nil {
					continue
				}
				r.Agent = strings.TrimPrefix(m.Subject(), "task.result.")
				out = append(out, r)
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return out, fmt.Errorf("%s: %w", name, err)
			}
			if n == 0 {
				break
			}
		}
	}
	return out, nil
}
