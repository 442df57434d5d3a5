package operator

import (
	"context"
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

// DeadCount is how many parked tasks the dead-letter stream keeps.
func (c *Client) DeadCount(ctx context.Context) (uint64, error) {
	s, err := c.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}
