package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// Filter selects entries: at or after Since (zero: all), of Agent (as who
// or whom it concerns; "": any), of Kind ("": any).
type Filter struct {
	Since time.Time
	Agent string
	Kind  string
}

// Match reports whether e passes the filter.
func (f Filter) Match(e protocol.AuditEntry) bool {
	return (f.Agent == "" || e.Who == f.Agent || e.Agent == f.Agent) && (f.Kind == "" || e.Kind == f.Kind) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// Each reads the trail in order, from Since on, calling fn with each
// entry's raw line and the stream sequence of the message holding it
// (entries that do not match the rest of the filter are skipped; an
// unreadable one is passed on with a zero entry, for a verifier to flag).
// It stops at the last message there was when it began.
func Each(ctx context.Context, js jetstream.JetStream, f Filter, fn func(seq uint64, raw []byte, e protocol.AuditEntry) error) error {
	stream, err := js.Stream(ctx, protocol.AuditStream)
	if err != nil {
		return fmt.Errorf("audit: stream %s: %w", protocol.AuditStream, err)
	}
	state := stream.CachedInfo().State
	if state.Msgs == 0 {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.AuditSubject}}
	if !f.Since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &f.Since
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("audit: read %s: %w", protocol.AuditStream, err)
	}
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		return nil
	}
	for {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("audit: read %s: %w", protocol.AuditStream, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("audit: read %s: %w", protocol.AuditStream, err)
			}
			for _, line := range lines(m.Data()) {
				var e protocol.AuditEntry
				if json.Unmarshal(line, &e) == nil && !f.Match(e) {
					continue
				}
				if err := fn(md.Sequence.Stream, line, e); err != nil {
					return err
				}
			}
			if md.Sequence.Stream >= state.LastSeq || md.NumPending == 0 {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("audit: read %s: %w", protocol.AuditStream, err)
		}
		if n == 0 {
			return nil // nothing more came within the wait
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Verify checks the whole trail against retention's checkpoint, the head
// anchored in the bus, and the heads given (read from the writer's log, or
// kept by the operator).
func Verify(ctx context.Context, js jetstream.JetStream, given ...protocol.AuditAnchor) (Report, error) {
	kv, err := js.KeyValue(ctx, protocol.AuditAnchorsBucket)
	if err != nil {
		return Report{}, fmt.Errorf("audit: bucket %s: %w", protocol.AuditAnchorsBucket, err)
	}
	cp, err := readAnchor(ctx, kv, protocol.AuditCheckpointKey)
	if err != nil {
		return Report{}, err
	}
	head, err := readAnchor(ctx, kv, protocol.AuditHeadKey)
	if err != nil {
		return Report{}, err
	}
	anchors := append([]protocol.AuditAnchor(nil), given...)
	if head != nil {
		anchors = append(anchors, *head)
	}
	v := NewVerifier(cp, anchors...)
	err = Each(ctx, js, Filter{}, func(seq uint64, raw []byte, _ protocol.AuditEntry) error {
		v.Add(seq, raw)
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	// After the entries: the writer counts there before an entry says so.
	var u protocol.AuditUnrecorded
	ok, err := readKey(ctx, kv, protocol.AuditUnrecordedKey, &u)
	if err != nil {
		return Report{}, err
	}
	if ok {
		v.Unrecorded(&u)
	}
	return v.Report(), nil
}

// readAnchor reads key of the anchors' bucket (nil: none written).
func readAnchor(ctx context.Context, kv jetstream.KeyValue, key string) (*protocol.AuditAnchor, error) {
	var a protocol.AuditAnchor
	ok, err := readKey(ctx, kv, key, &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

// readKey reads key of the anchors' bucket into v (false: none written).
func readKey(ctx context.Context, kv jetstream.KeyValue, key string, v any) (bool, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("audit: %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return false, fmt.Errorf("audit: %s unreadable: %w", key, err)
	}
	return true, nil
}
