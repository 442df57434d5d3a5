package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/kvwatch"
	"github.com/ai-flock/ai-flock/protocol"
)

// store is this node's view of the board's bucket: every task, kept current
// by a watcher on the bucket and by this node's own writes (at once, so a
// request sees what the one before it wrote). It is only a view: each
// write is a compare-and-set on the revision it read, and a conflict reads
// the entry from the bucket again.
type store struct {
	kv     jetstream.KeyValue
	log    *slog.Logger
	loaded chan struct{} // closed once the watcher delivered every entry
	dead   chan struct{} // closed if the watcher stopped before the service did

	mu       sync.RWMutex
	tasks    map[string]protocol.BoardTask  // key -> task (Revision set)
	byStatus map[string]map[string]struct{} // status -> keys
	byPlan   map[string]map[string]struct{} // plan -> keys
	byNeed   map[string]map[string]struct{} // a task's key -> the keys of the tasks that need it
	created  map[string]int                 // creator -> tasks it created
}

// openStore binds the watcher (it runs until run ends) and waits, within
// ctx, for the bucket's entries.
func openStore(ctx, run context.Context, kv jetstream.KeyValue, log *slog.Logger, bg *sync.WaitGroup) (*store, error) {
	st := &store{kv: kv, log: log, loaded: make(chan struct{}), dead: make(chan struct{}),
		tasks: map[string]protocol.BoardTask{}, byStatus: map[string]map[string]struct{}{}, byPlan: map[string]map[string]struct{}{},
		byNeed: map[string]map[string]struct{}{}, created: map[string]int{}}
	w, err := kv.WatchAll(run)
	if err != nil {
		return nil, fmt.Errorf("board: watch %s: %w", protocol.BoardBucket, err)
	}
	bg.Add(1)
	go st.watch(run, w, bg)
	select {
	case <-st.loaded:
		return st, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("board: %s not loaded: %w", protocol.BoardBucket, ctx.Err())
	}
}

func (st *store) watch(ctx context.Context, w jetstream.KeyWatcher, bg *sync.WaitGroup) {
	defer bg.Done()
	defer w.Stop()
	if kvwatch.Follow(ctx, w, st.take, func() { close(st.loaded) }) {
		st.log.Error("board: the bucket's watcher stopped")
		close(st.dead)
	}
}

// take brings one entry of the bucket into the view.
func (st *store) take(e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		st.remove(e.Key(), e.Revision())
		return
	}
	if st.has(e.Key(), e.Revision()) {
		return // this node's own write, in the view since it was made: not decoded again
	}
	var t protocol.BoardTask
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		st.log.Warn("board: unreadable entry ignored", "key", e.Key(), "err", err)
		return
	}
	t.Revision = e.Revision()
	st.put(t)
}

// waitLoaded waits until the view holds the bucket's entries.
func (st *store) waitLoaded(ctx context.Context) error {
	select {
	case <-st.loaded:
		return nil
	case <-ctx.Done():
		return refuse(protocol.BoardErrInternal, "the board is still loading its tasks")
	}
}

// put takes t into the view unless the view has it at this revision or a
// later one.
func (st *store) put(t protocol.BoardTask) {
	key := t.Key()
	st.mu.Lock()
	defer st.mu.Unlock()
	old, had := st.tasks[key]
	if had && old.Revision >= t.Revision {
		return
	}
	if had {
		st.unindex(key, old)
	}
	st.tasks[key] = t
	index(st.byStatus, t.Status, key)
	index(st.byPlan, t.Plan, key)
	for _, n := range t.Needs {
		index(st.byNeed, protocol.BoardKey(t.Plan, n), key)
	}
	st.created[t.CreatedBy]++
}

// has: the view holds the task at key at revision rev or a later one (put
// would keep it as it is).
func (st *store) has(key string, rev uint64) bool {
	st.mu.RLock()
	defer st.mu.RUnlock()
	t, ok := st.tasks[key]
	return ok && t.Revision >= rev
}

func (st *store) remove(key string, rev uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, had := st.tasks[key]; had && old.Revision < rev {
		st.unindex(key, old)
		delete(st.tasks, key)
	}
}

func (st *store) unindex(key string, old protocol.BoardTask) {
	unindex(st.byStatus, old.Status, key)
	unindex(st.byPlan, old.Plan, key)
	for _, n := range old.Needs {
		unindex(st.byNeed, protocol.BoardKey(old.Plan, n), key)
	}
	if st.created[old.CreatedBy]--; st.created[old.CreatedBy] <= 0 {
		delete(st.created, old.CreatedBy)
	}
}

func index(m map[string]map[string]struct{}, k, key string) {
	if m[k] == nil {
		m[k] = map[string]struct{}{}
	}
	m[k][key] = struct{}{}
}

func unindex(m map[string]map[string]struct{}, k, key string) {
	delete(m[k], key)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

func (st *store) get(key string) (protocol.BoardTask, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	t, ok := st.tasks[key]
	return t, ok
}

func (st *store) count() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.tasks)
}

// createdBy is how many tasks creator made (the operator's, or an agent's subtasks).
func (st *store) createdBy(creator string) int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.created[creator]
}

// where returns the tasks of the index entry (a status, or a plan) that keep
// keep (nil: all of them). keep runs under the view's read lock: it must not
// read the view itself.
func (st *store) where(m func(*store) map[string]struct{}, keep func(protocol.BoardTask) bool) []protocol.BoardTask {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []protocol.BoardTask
	for key := range m(st) {
		if t := st.tasks[key]; keep == nil || keep(t) {
			out = append(out, t)
		}
	}
	return out
}

func (st *store) withStatus(status string, keep func(protocol.BoardTask) bool) []protocol.BoardTask {
	return st.where(func(st *store) map[string]struct{} { return st.byStatus[status] }, keep)
}

func (st *store) ofPlan(plan string, keep func(protocol.BoardTask) bool) []protocol.BoardTask {
	return st.where(func(st *store) map[string]struct{} { return st.byPlan[plan] }, keep)
}

// needing returns the tasks that need the task at key and keep keep.
func (st *store) needing(key string, keep func(protocol.BoardTask) bool) []protocol.BoardTask {
	return st.where(func(st *store) map[string]struct{} { return st.byNeed[key] }, keep)
}

func (st *store) all(keep func(protocol.BoardTask) bool) []protocol.BoardTask {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []protocol.BoardTask
	for _, t := range st.tasks {
		if keep == nil || keep(t) {
			out = append(out, t)
		}
	}
	return out
}

// oldest returns the task of status, first by Created then by key, that
// keeps keep (given the task's key, which it need not make again).
func (st *store) oldest(status string, keep func(key string, t *protocol.BoardTask) bool) (protocol.BoardTask, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var (
		best    protocol.BoardTask
		bestKey string
		found   bool
	)
	for key := range st.byStatus[status] {
		t, ok := st.tasks[key]
		if !ok || !keep(key, &t) {
			continue
		}
		if !found || t.Created.Before(best.Created) || t.Created.Equal(best.Created) && key < bestKey {
			best, bestKey, found = t, key, true
		}
	}
	return best, found
}

// fetch reads the task at key from the bucket (not the view) and takes it
// into the view.
func (st *store) fetch(ctx context.Context, key string) (protocol.BoardTask, bool, error) {
	e, err := st.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return protocol.BoardTask{}, false, nil
	}
	if err != nil {
		return protocol.BoardTask{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	var t protocol.BoardTask
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return protocol.BoardTask{}, false, fmt.Errorf("read %s: unreadable entry: %w", key, err)
	}
	t.Revision = e.Revision()
	st.put(t)
	return t, true, nil
}

// lookup is the task at key: the view's, or the bucket's when the view has
// none (written by another node a moment ago).
func (st *store) lookup(ctx context.Context, key string) (protocol.BoardTask, bool, error) {
	if t, ok := st.get(key); ok {
		return t, true, nil
	}
	return st.fetch(ctx, key)
}

// errUnchanged: a change function found nothing to do.
var errUnchanged = errors.New("unchanged")

// change makes the next version of the task at key with next and writes it
// with compare-and-set on the revision it was made from; on a conflict it
// reads the entry from the bucket and asks next again, a bounded number of
// times. A refusal from next is returned once next refused the bucket's
// entry (not only the view's).
func (s *Service) change(ctx context.Context, key string, next func(cur protocol.BoardTask) (protocol.BoardTask, error)) (protocol.BoardTask, error) {
	cur, ok := s.st.get(key)
	fresh := false
	for range maxConflicts {
		if !ok {
			var err error
			if cur, ok, err = s.st.fetch(ctx, key); err != nil {
				return cur, err
			}
			if !ok {
				return cur, noTask(key)
			}
			fresh = true
		}
		n, err := next(cur)
		if errors.Is(err, errUnchanged) {
			return cur, nil
		}
		var be *protocol.BoardError
		if errors.As(err, &be) && !fresh {
			// A refusal read from the view, which may lag another node's
			// write: it stands only if the bucket says so too.
			ok = false
			continue
		}
		if err != nil {
			return cur, err
		}
		if err = s.write(ctx, &cur, &n); err == nil {
			return n, nil
		}
		if !conflict(err) {
			return cur, err
		}
		ok = false // someone wrote it first: read it again
	}
	return cur, refuse(protocol.BoardErrConflict, "task %s changed under this request %d times: ask again", key, maxConflicts)
}

func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}

// write stores next: created when prev is nil, else updated on prev's
// revision. The view takes it, the transition is published on the task's
// event subject, and a task that became ready rings.
func (s *Service) write(ctx context.Context, prev, next *protocol.BoardTask) error {
	next.V = protocol.Version
	next.Revision = 0
	next.Updated = s.now()
	if next.Created.IsZero() {
		next.Created = next.Updated
	}
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if len(data) > maxValueBytes {
		return refuse(protocol.BoardErrInvalid, "task %s would be %d bytes, over the board's %d-byte entry", next.Key(), len(data), maxValueBytes)
	}
	var rev uint64
	if prev == nil {
		rev, err = s.st.kv.Create(ctx, next.Key(), data)
	} else {
		rev, err = s.st.kv.Update(ctx, next.Key(), data, prev.Revision)
	}
	if err != nil {
		if conflict(err) {
			return err
		}
		return fmt.Errorf("write %s: %w", next.Key(), err)
	}
	next.Revision = rev
	s.st.put(*next)
	if ev, err := json.Marshal(next); err == nil {
		if err := s.nc.Publish(protocol.BoardEventSubject(next.Plan, next.ID), ev); err != nil {
			s.log.Warn("board: event not published", "task", next.Key(), "err", err)
		}
	}
	if next.Status == protocol.BoardReady && (prev == nil || prev.Status != protocol.BoardReady) {
		s.ringSoon()
	}
	return nil
}

// tally counts the tasks by status, and the claimed ones by holder.
func (st *store) tally() (byStatus, heldBy map[string]int) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	byStatus, heldBy = make(map[string]int, len(st.byStatus)), map[string]int{}
	for status, keys := range st.byStatus {
		byStatus[status] = len(keys)
	}
	for key := range st.byStatus[protocol.BoardClaimed] {
		heldBy[st.tasks[key].Holder]++
	}
	return byStatus, heldBy
}
