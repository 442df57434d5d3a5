package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

// The pool dispatcher. No agent pulls from the pool consumer: a shared pull
// consumer has no per-client bound, so an agent could take every pool task
// (more than it can run) and sit on them. The bus (the JetStream meta leader
// of a clustered bus) takes each pool task and stores a copy on
// tasks.pool.<id> for one agent with a free slot, then acks the pool task.
// That agent's own consumer delivers the copy, and its MaxAckPending (the
// agent's slots) is the bound, kept by the server. The copy is the state:
// acked by the agent, it leaves the stream (interest retention); still there
// past its timeout and the grace, the bus takes it back (deletes it, which
// frees the agent's slot) and queues the task on the pool again, or parks it
// on the dead-letter stream after maxDeliver agents. Any node that becomes
// leader finds the copies in the stream, so a node lost loses no pool task.

// Pacing of the dispatcher.
var (
	poolFetchWait = time.Second            // one fetch from the pool waits this long for work
	poolIdle      = 100 * time.Millisecond // no free slot anywhere and no result: look again after this
	poolSweep     = 2 * time.Second        // how often copies are checked against their deadline
	poolNotLeader = time.Second            // a node that does not dispatch checks leadership this often
	poolRelist    = 100 * time.Millisecond // how long a reading of the agents' consumers is trusted
)

// poolMsgIDs: a copy and a requeue of the same attempt are stored once,
// whoever (a retry, a new leader) makes them again within the stream's
// duplicate window.
func poolCopyID(seq uint64, attempt int) string {
	return "pool-copy-" + strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(attempt)
}

func poolRequeueID(seq uint64, attempt int) string {
	return "pool-requeue-" + strconv.FormatUint(seq, 10) + "-" + strconv.Itoa(attempt)
}

// dispatching reports whether this node hands out pool tasks.
func (s *Server) dispatching() bool { return !s.clustered || s.ns.JetStreamIsLeader() }

// poolLoop hands out pool tasks and takes back the ones held too long.
func (s *Server) poolLoop() {
	defer s.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	d := &dispatch{given: map[uint64]string{}, answered: make(chan string, 1024)}
	// A result for a copy this node gave frees that agent's slot (it acks
	// right after): counted at once, without reading every consumer again.
	if sub, err := s.nc.Subscribe(protocol.SubjectResults, d.onResult); err == nil {
		defer sub.Unsubscribe()
	}
	var (
		cons      jetstream.Consumer
		free      *freeSlots
		listedAt  time.Time
		lastSweep time.Time
		lastErr   string
	)
	note := func(err error) {
		if msg := err.Error(); msg != lastErr { // once per distinct reason
			s.log.Warn("pool dispatcher waiting", "reason", msg)
			lastErr = msg
		}
	}
	for ctx.Err() == nil {
		if !s.dispatching() || len(s.Topology().Pool.Agents) == 0 {
			cons, free = nil, nil
			pace.Sleep(ctx, poolNotLeader)
			continue
		}
		if time.Since(lastSweep) >= poolSweep {
			if err := s.sweepPool(ctx, d); err != nil && ctx.Err() == nil {
				note(fmt.Errorf("sweep: %w", err))
			}
			lastSweep = time.Now()
		}
		if cons == nil {
			c, err := s.js.Consumer(ctx, protocol.StreamTasks, protocol.ConsumerPool)
			if err != nil {
				note(fmt.Errorf("pool consumer: %w", err))
				pace.Sleep(ctx, poolNotLeader)
				continue
			}
			cons = c
		}
		if free == nil || time.Since(listedAt) >= poolRelist {
			d.drain(nil) // answers before this reading are in it
			f, err := s.freeSlots(ctx)
			if err != nil {
				note(fmt.Errorf("agents' consumers: %w", err))
				pace.Sleep(ctx, poolIdle)
				continue
			}
			free, listedAt = f, time.Now()
		}
		d.drain(free)
		if free.total() == 0 { // every slot busy: until an answer, or read again
			select {
			case <-ctx.Done():
			case id := <-d.answered:
				free.credit(id)
			case <-time.After(poolIdle):
				free = nil
			}
			continue
		}
		// What is queued now, at once; with nothing queued, wait for work
		// (and read the consumers again after the wait).
		given, err := s.handOutBatch(ctx, cons, d, free, free.total(), false)
		if err == nil && given == 0 {
			_, err = s.handOutBatch(ctx, cons, d, free, 1, true)
			free = nil
		}
		if err != nil && ctx.Err() == nil {
			note(fmt.Errorf("fetch: %w", err))
			cons, free = nil, nil
			pace.Sleep(ctx, poolIdle)
			continue
		}
		lastErr = ""
	}
}

// dispatch is what one node's dispatcher remembers between readings of the
// consumers: the copies it gave and has not yet seen answered.
type dispatch struct {
	mu       sync.Mutex
	given    map[uint64]string // pool seq -> agent
	answered chan string       // agents that answered a copy given to them
}

func (d *dispatch) gave(seq uint64, agent string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.given) >= 1<<16 { // answers never seen (a copy parked by the agent's consumer): start over
		clear(d.given)
	}
	d.given[seq] = agent
}

func (d *dispatch) forget(seq uint64) {
	d.mu.Lock()
	delete(d.given, seq)
	d.mu.Unlock()
}

// onResult counts a result as a freed slot only when it answers a copy this
// node gave that very agent: an agent publishing results for nothing frees
// no slot it does not have.
func (d *dispatch) onResult(m *nats.Msg) {
	var r struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
	}
	if json.Unmarshal(m.Data, &r) != nil || r.Subject != protocol.SubjectTasksPool {
		return
	}
	agent := strings.TrimPrefix(m.Subject, "task.result.")
	d.mu.Lock()
	ok := d.given[r.Seq] == agent
	if ok {
		delete(d.given, r.Seq)
	}
	d.mu.Unlock()
	if ok {
		select {
		case d.answered <- agent:
		default:
		}
	}
}

// drain credits the answers so far to free (nil: drops them).
func (d *dispatch) drain(free *freeSlots) {
	for {
		select {
		case id := <-d.answered:
			if free != nil {
				free.credit(id)
			}
		default:
			return
		}
	}
}

// handOutBatch fetches up to n pool tasks, at once (wait false: only what is
// queued) or waiting up to poolFetchWait for the first, and hands each out.
func (s *Server) handOutBatch(ctx context.Context, cons jetstream.Consumer, d *dispatch, free *freeSlots, n int, wait bool) (int, error) {
	var (
		batch jetstream.MessageBatch
		err   error
	)
	if wait {
		// The wait ends with the bus: a stopping bus does not sit out the fetch.
		fctx, cancel := context.WithTimeout(ctx, poolFetchWait)
		defer cancel()
		batch, err = cons.Fetch(n, jetstream.FetchContext(fctx))
	} else {
		batch, err = cons.FetchNoWait(n)
	}
	if err != nil {
		return 0, err
	}
	// Copies are published together and their acks awaited together: a
	// burst costs one round trip, not two per task.
	type out struct {
		msg   jetstream.Msg
		seq   uint64
		agent string
		ack   jetstream.PubAckFuture
	}
	var outs []out
	for msg := range batch.Messages() {
		o := out{msg: msg}
		var err error
		if o.seq, o.agent, o.ack, err = s.copyFor(msg, free); err != nil {
			s.log.Warn("pool task not handed out: it stays on the pool", "err", err)
			_ = msg.NakWithDelay(poolIdle)
			continue
		}
		d.gave(o.seq, o.agent)
		outs = append(outs, o)
	}
	given := 0
	for _, o := range outs {
		select {
		case <-o.ack.Ok():
			// Not acked (the ack lost, this node gone): the task comes back
			// to the pool, and the copy's ID makes making it again a no-op.
			_ = o.msg.Ack()
			given++
		case err := <-o.ack.Err():
			s.log.Warn("pool task not handed out: it stays on the pool", "seq", o.seq, "agent", o.agent, "err", err)
			d.forget(o.seq)
			_ = o.msg.NakWithDelay(poolIdle)
		case <-ctx.Done():
			return given, ctx.Err()
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return given, err
	}
	return given, nil
}

// poolOrigin is the pool task a message on tasks.pool stands for: itself, or
// (requeued after a take-back) the first one, named in its headers.
func poolOrigin(msg jetstream.Msg) (seq uint64, attempt int, err error) {
	if seq, attempt, ok := protocol.PoolOrigin(msg.Headers().Get); ok {
		return seq, attempt, nil
	}
	meta, err := msg.Metadata()
	if err != nil {
		return 0, 0, err
	}
	return meta.Sequence.Stream, 1, nil
}

// copyFor publishes a copy of the pool task msg for an agent with a free
// slot (asynchronously: the future says when it is stored).
func (s *Server) copyFor(msg jetstream.Msg, free *freeSlots) (uint64, string, jetstream.PubAckFuture, error) {
	seq, attempt, err := poolOrigin(msg)
	if err != nil {
		return 0, "", nil, err
	}
	agent := free.pick(takenFrom(msg.Headers()))
	if agent == "" {
		return seq, "", nil, errors.New("no agent has a free slot any more")
	}
	// The topology as it is now: a reconcile that removes an agent holds it
	// until the agent's consumer is gone (its copies handed back first), so
	// no copy goes to a consumer about to be deleted.
	if !slices.ContainsFunc(s.Topology().Pool.Agents, func(a protocol.PoolAgent) bool { return a.ID == agent }) {
		return seq, "", nil, fmt.Errorf("agent %s left the flock", agent)
	}
	c := nats.NewMsg(protocol.PoolTaskSubject(agent))
	c.Data = msg.Data()
	c.Header.Set(protocol.HeaderPoolSeq, strconv.FormatUint(seq, 10))
	c.Header.Set(protocol.HeaderPoolAttempt, strconv.Itoa(attempt))
	if v := msg.Headers().Get(headerTakenFrom); v != "" {
		c.Header.Set(headerTakenFrom, v)
	}
	if v := msg.Headers().Get(protocol.HeaderTraceparent); v != "" {
		c.Header.Set(protocol.HeaderTraceparent, v) // the operator's trace goes with the task
	}
	c.Header.Set(nats.MsgIdHdr, poolCopyID(seq, attempt))
	f, err := s.js.PublishMsgAsync(c)
	if err != nil {
		return seq, agent, nil, fmt.Errorf("copy of pool task %d for %s: %w", seq, agent, err)
	}
	s.log.Debug("pool task given", "seq", seq, "attempt", attempt, "agent", agent)
	return seq, agent, f, nil
}
