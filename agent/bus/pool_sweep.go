package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// headerTakenFrom lists the agents a pool task was taken back from, so the
// next copy goes to another agent if one is free.
const headerTakenFrom = "Flock-Pool-Taken-From"

func takenFrom(h nats.Header) map[string]bool {
	m := map[string]bool{}
	for _, id := range strings.Split(h.Get(headerTakenFrom), ",") {
		if id != "" {
			m[id] = true
		}
	}
	return m
}

// sweepPool takes back every copy held past its deadline: the task's timeout
// (its own, or its agent's default) plus the grace, from when the copy was
// stored. A copy acked by its agent is no longer in the stream.
func (s *Server) sweepPool(ctx context.Context, d *dispatch) error {
	topo := s.Topology()
	pool, maxDeliver := topo.Pool, poolMaxDeliver(topo)
	agents := map[string]protocol.PoolAgent{}
	for _, a := range pool.Agents {
		agents[a.ID] = a
	}
	stream, err := s.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		return err
	}
	prefix := protocol.SubjectTasksPool + "."
	return eachCopy(ctx, stream, prefix+"*", func(raw *jetstream.RawStreamMsg) error {
		agent := strings.TrimPrefix(raw.Subject, prefix)
		timeout := time.Duration(agents[agent].TaskTimeout)
		if t, err := protocol.DecodeTask(raw.Data, 0); err == nil && t.Timeout > 0 {
			timeout = time.Duration(t.Timeout)
		}
		if timeout <= 0 {
			timeout = protocol.MaxTaskTimeout // an agent gone from the topology: its own consumer is deleted with it
		}
		if time.Since(raw.Time) < timeout+time.Duration(pool.Grace) {
			return nil
		}
		if seq, _, ok := protocol.PoolOrigin(raw.Header.Get); ok {
			d.forget(seq)
		}
		reason := fmt.Sprintf("pool task taken back from agent %s: no answer within its timeout %s and the pool's grace %s", agent, timeout, time.Duration(pool.Grace))
		if err := s.takeBack(ctx, stream, raw, agent, reason, maxDeliver); err != nil {
			s.log.Warn("pool task not taken back yet", "copy", raw.Sequence, "agent", agent, "err", err)
		}
		return nil
	})
}

// takeBack queues a copy's task on the pool again (or parks it once it was
// given to maxDeliver agents), then deletes the copy: the agent's consumer
// drops it, and the slot it held is free.
func (s *Server) takeBack(ctx context.Context, stream jetstream.Stream, raw *jetstream.RawStreamMsg, agent, reason string, maxDeliver int) error {
	seq, attempt, ok := protocol.PoolOrigin(raw.Header.Get)
	if !ok { // the operator wrote to tasks.pool.<id> itself: give it the same treatment
		seq, attempt = raw.Sequence, 1
	}
	taken := raw.Header.Get(headerTakenFrom)
	if taken != "" {
		taken += ","
	}
	taken += agent
	if attempt >= maxDeliver {
		if err := s.deadLetter(ctx, raw, protocol.ConsumerPool, uint64(attempt),
			fmt.Sprintf("%s; given to %d agents (%s), none answered", reason, attempt, taken)); err != nil {
			return err
		}
	} else {
		m := nats.NewMsg(protocol.SubjectTasksPool)
		m.Data = raw.Data
		m.Header.Set(protocol.HeaderPoolSeq, strconv.FormatUint(seq, 10))
		m.Header.Set(protocol.HeaderPoolAttempt, strconv.Itoa(attempt+1))
		m.Header.Set(headerTakenFrom, taken)
		if v := raw.Header.Get(protocol.HeaderTraceparent); v != "" {
			m.Header.Set(protocol.HeaderTraceparent, v)
		}
		m.Header.Set(nats.MsgIdHdr, poolRequeueID(seq, attempt+1))
		pctx, cancel := bounded(ctx)
		_, err := s.js.PublishMsg(pctx, m)
		cancel()
		if err != nil {
			return fmt.Errorf("queue again: %w", err)
		}
	}
	dctx, cancel := bounded(ctx)
	err := stream.DeleteMsg(dctx, raw.Sequence)
	cancel()
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("delete copy: %w", err)
	}
	s.log.Warn("pool task taken back", "seq", seq, "attempt", attempt, "agent", agent, "reason", reason)
	return nil
}

// poolMaxDeliver is how many agents a pool task is given to at most: the
// pool consumer's maxDeliver.
func poolMaxDeliver(topo protocol.Topology) int {
	for _, c := range topo.Consumers {
		if c.Stream == protocol.StreamTasks && c.Config.Durable == protocol.ConsumerPool && c.Config.MaxDeliver > 0 {
			return c.Config.MaxDeliver
		}
	}
	return 5
}

// handBackCopies queues again the pool tasks given to agent, whose consumer
// is about to be deleted (the agent left the flock): with no consumer
// interested in them, interest retention would drop the copies, and the
// tasks with them.
func (s *Server) handBackCopies(ctx context.Context, stream jetstream.Stream, agent string, maxDeliver int) error {
	return eachCopy(ctx, stream, protocol.PoolTaskSubject(agent), func(raw *jetstream.RawStreamMsg) error {
		return s.takeBack(ctx, stream, raw, agent, "pool task taken back from agent "+agent+": it left the flock", maxDeliver)
	})
}

// eachCopy calls fn on every message of the task stream on subject (pool
// copies: tasks.pool.<id> or tasks.pool.*), oldest first, until fn fails.
func eachCopy(ctx context.Context, stream jetstream.Stream, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		gctx, cancel := bounded(ctx)
		raw, err := stream.GetMsg(gctx, seq, jetstream.WithGetMsgSubject(subject))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = raw.Sequence
		if err := fn(raw); err != nil {
			return err
		}
	}
	return ctx.Err()
}
