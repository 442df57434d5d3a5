package bustest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// Sender publishes tasks as a careful operator does on a clustered bus: each
// with its ID as the message ID, sent again until the bus acknowledges it
// (the ID makes a copy the bus did store a no-op). It records what was
// acknowledged and what the faults cost.
type Sender struct {
	JS jetstream.JetStream

	mu      sync.Mutex
	acked   map[string]bool
	retries int
	longest time.Duration
}

// Send stores task on subject, retrying every 100 ms until ctx ends.
func (s *Sender) Send(ctx context.Context, subject string, task protocol.Task) error {
	b, err := json.Marshal(task)
	if err != nil {
		return err
	}
	start := time.Now()
	for {
		m := nats.NewMsg(subject)
		m.Data = b
		m.Header.Set(nats.MsgIdHdr, task.ID)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.JS.PublishMsg(pctx, m)
		cancel()
		s.mu.Lock()
		if err == nil {
			if s.acked == nil {
				s.acked = map[string]bool{}
			}
			s.acked[task.ID] = true
			s.longest = max(s.longest, time.Since(start))
		} else {
			s.retries++
		}
		s.mu.Unlock()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task %s never stored: %w", task.ID, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Acked lists the IDs of the tasks the bus acknowledged.
func (s *Sender) Acked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.acked))
	for id := range s.acked {
		ids = append(ids, id)
	}
	return ids
}

// Cost is how many publishes had to be sent again, and the longest a task
// waited for its acknowledgement.
func (s *Sender) Cost() (retries int, longest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries, s.longest
}

// StreamLeader is the number of the bus node leading stream name (node
// names end in -<n>), waiting up to d for the cluster to have one.
func StreamLeader(js jetstream.JetStream, name string, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, name)
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader != "" {
			l := st.CachedInfo().Cluster.Leader
			return strconv.Atoi(l[strings.LastIndex(l, "-")+1:])
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("stream %s has no leader after %s (last error %v)", name, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
