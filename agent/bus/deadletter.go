package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// maxDeliveriesAdvisories is where the server says a consumer gave up on a task.
const maxDeliveriesAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + protocol.StreamTasks + ".*"

type advisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func (s *Server) onAdvisory(m *nats.Msg) {
	var a advisory
	if err := json.Unmarshal(m.Data, &a); err != nil || a.StreamSeq == 0 || a.Consumer == "" {
		s.log.Error("unreadable max-deliveries advisory", "subject", m.Subject, "err", err)
		return
	}
	select {
	case s.dead <- a:
	default:
		// Never block the connection's dispatcher; the task stays in
		// FLOCK_TASKS (it is not lost) and the log says which one.
		s.log.Error("dead-letter queue full: task left in place", "consumer", a.Consumer, "seq", a.StreamSeq)
	}
}

func (s *Server) parkLoop() {
	defer s.done.Done()
	for {
		select {
		case <-s.stop:
			return
		case a := <-s.dead:
			var err error
			for try := range 5 {
				if try > 0 {
					select {
					case <-s.stop:
						return
					case <-time.After(time.Duration(try) * 200 * time.Millisecond):
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = s.park(ctx, a)
				cancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				s.log.Error("could not park task: left in "+protocol.StreamTasks, "consumer", a.Consumer, "seq", a.StreamSeq, "err", err)
			}
		}
	}
}

// park copies task a.StreamSeq to deadletter.<consumer> with the reason in
// its headers, then removes it from the task stream unless another consumer
// may still run it (a tasks.all task other agents have not finished).
func (s *Server) park(ctx context.Context, a advisory) error {
	stream, err := s.js.Stream(ctx, protocol.StreamTasks)
	if err != nil {
		return err
	}
	raw, err := stream.GetMsg(ctx, a.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		s.log.Warn("task gone before it could be parked", "consumer", a.Consumer, "seq", a.StreamSeq)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get task %d: %w", a.StreamSeq, err)
	}
	reason := fmt.Sprintf("max deliveries exhausted: consumer %s delivered it %d times without an ack", a.Consumer, a.Deliveries)
	if err := s.deadLetter(ctx, raw, a.Consumer, a.Deliveries, reason); err != nil {
		return err
	}

	still, err := s.othersMayNeed(ctx, raw.Subject, a.Consumer, a.StreamSeq)
	if err != nil {
		return err
	}
	if still {
		s.log.Info("parked task kept in the task stream for other consumers", "seq", a.StreamSeq, "subject", raw.Subject)
		return nil
	}
	if err := stream.DeleteMsg(ctx, a.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove parked task %d: %w", a.StreamSeq, err)
	}
	return nil
}

// deadLetter stores a copy of raw on deadletter.<consumer> with the reason
// and where it came from in its headers.
func (s *Server) deadLetter(ctx context.Context, raw *jetstream.RawStreamMsg, consumer string, deliveries uint64, reason string) error {
	m := nats.NewMsg(protocol.DeadSubject(consumer))
	m.Data = raw.Data
	for k, vs := range raw.Header {
		if strings.HasPrefix(k, "Nats-") {
			continue
		}
		m.Header[k] = vs
	}
	m.Header.Set(protocol.HeaderDeadReason, reason)
	m.Header.Set(protocol.HeaderDeadConsumer, consumer)
	m.Header.Set(protocol.HeaderDeadDeliveries, strconv.FormatUint(deliveries, 10))
	m.Header.Set(protocol.HeaderOriginalStream, protocol.StreamTasks)
	m.Header.Set(protocol.HeaderOriginalSubject, raw.Subject)
	m.Header.Set(protocol.HeaderOriginalSeq, strconv.FormatUint(raw.Sequence, 10))
	m.Header.Set(protocol.HeaderOriginalTime, raw.Time.UTC().Format(time.RFC3339Nano))
	if id := raw.Header.Get(nats.MsgIdHdr); id != "" {
		m.Header.Set("Flock-Original-Msg-Id", id)
	}
	// Idempotent: parking the same task twice (a retry) stores it once.
	m.Header.Set(nats.MsgIdHdr, "dead."+consumer+"."+strconv.FormatUint(raw.Sequence, 10))
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish dead letter: %w", err)
	}
	s.log.Warn("task parked on dead-letter stream", "consumer", consumer, "seq", raw.Sequence, "subject", raw.Subject, "reason", reason)
	return nil
}

// othersMayNeed reports whether a consumer other than gaveUp is interested in
// subject and has not yet acked past seq.
func (s *Server) othersMayNeed(ctx context.Context, subject, gaveUp string, seq uint64) (bool, error) {
	for _, c := range s.Topology().Consumers {
		if c.Stream != protocol.StreamTasks || c.Config.Durable == gaveUp {
			continue
		}
		filters := slices.Clone(c.Config.FilterSubjects)
		if c.Config.FilterSubject != "" {
			filters = append(filters, c.Config.FilterSubject)
		}
		interested := len(filters) == 0
		for _, f := range filters {
			if subjectMatches(f, subject) {
				interested = true
			}
		}
		if !interested {
			continue
		}
		cons, err := s.js.Consumer(ctx, protocol.StreamTasks, c.Config.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return true, err
		}
		if cons.CachedInfo().AckFloor.Stream < seq {
			return true, nil
		}
	}
	return false, nil
}

// subjectMatches reports whether subject matches filter (with * and >).
func subjectMatches(filter, subject string) bool {
	f, t := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(t) > i
		}
		if i >= len(t) || (tok != "*" && tok != t[i]) {
			return false
		}
	}
	return len(f) == len(t)
}
