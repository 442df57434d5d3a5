package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// ErrUnavailable wraps every failure to reach the bucket.
var ErrUnavailable = errors.New("the spending ledger on the bus cannot be reached")

const (
	opTimeout    = 2 * time.Second        // one read or write of the bucket
	maxConflicts = 50                     // compare-and-set retries of one write
	retryOwed    = 500 * time.Millisecond // how soon what ended calls owe is written again after a failure
	// refreshAfter: an entry that refuses a call is read again if this
	// gateway last saw it longer ago than this, since the operator (a
	// raise, a reset) or another gateway may have changed it meanwhile.
	refreshAfter = time.Second
)

// Bus is the ledger in the bus's key-value bucket (protocol.LedgerBucket):
// one entry per agent, written with compare-and-set, so any number of
// gateways share it. Each agent's reservations are written in groups: while
// one write is on the way the next calls wait together for the one after
// it, so 32 calls at once cost a few writes, not 32 one after another.
//
// A call of an agent with a cap is forwarded only once its bound is in the
// bucket; when the bucket cannot be reached the call is refused
// (ErrUnavailable) rather than forwarded unmetered. A call of an agent
// without a cap is forwarded at once and its cost written when it ends
// (kept, and written once the bus is back, if it is down).
type Bus struct {
	js  jetstream.JetStream
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	kv    jetstream.KeyValue
	books map[string]*book
}

// book is one agent's part: the entry as last written or read, and what
// waits to be written.
type book struct {
	entry    protocol.LedgerEntry
	rev      uint64 // 0: no entry read or written yet
	loaded   bool
	seen     time.Time // when entry was last read or written
	budget   Budget
	waiting  []*waiter
	owed     map[int64]carry
	pending  int64 // bounds this gateway reserved and has not settled
	flushing bool
	retry    *time.Timer
}

type waiter struct {
	reserveOp
	err  error
	done chan struct{}
	gone bool // the caller stopped waiting: an admission is taken back
}

// NewBus is the ledger on nc's JetStream. The bucket is made by the bus
// (its topology); the gateway only reads and writes entries.
func NewBus(nc *nats.Conn, log *slog.Logger) (*Bus, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Bus{js: js, log: log, now: time.Now, books: map[string]*book{}}, nil
}

func (l *Bus) bookOf(agent string) *book {
	b := l.books[agent]
	if b == nil {
		b = &book{owed: map[int64]carry{}}
		l.books[agent] = b
	}
	return b
}

// Reserve charges the bound in the bucket before it admits the call.
func (l *Bus) Reserve(ctx context.Context, agent string, b Budget, bound int64) (Admission, error) {
	return l.ReserveUpTo(ctx, agent, b, bound, 0)
}

// ReserveUpTo charges the bound, fitted to what is left, in the bucket
// before it admits the call.
func (l *Bus) ReserveUpTo(ctx context.Context, agent string, b Budget, most, least int64) (Admission, error) {
	if b.Tokens <= 0 {
		return uncapped(agent, most), nil
	}
	w := &waiter{reserveOp: reserveOp{bound: most, least: least}, done: make(chan struct{})}
	l.mu.Lock()
	bk := l.bookOf(agent)
	bk.budget = b
	bk.waiting = append(bk.waiting, w)
	l.kick(agent, bk)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*opTimeout)
	defer cancel()
	select {
	case <-w.done:
		return w.adm, w.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.done: // answered meanwhile
		return w.adm, w.err
	default:
	}
	w.gone = true // if it is admitted after all, its bound is given back
	return Admission{}, fmt.Errorf("%w: no answer in %s", ErrUnavailable, 2*opTimeout)
}

// Settle owes the entry the call's cost in place of its bound and has it
// written in the background.
func (l *Bus) Settle(r Reservation, cost int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk := l.bookOf(r.agent)
	owe(bk.owed, r, cost)
	if r.epoch != noEpoch {
		bk.pending = max(0, bk.pending-r.bound)
	}
	l.kick(r.agent, bk)
	e := bk.entry // what the agent will have spent once this is written
	apply(&e, r.agent, l.now(), bk.budget, bk.owed, nil)
	return e.Spent
}

// kick starts the agent's writer unless it runs. l.mu is held.
func (l *Bus) kick(agent string, bk *book) {
	if bk.flushing {
		return
	}
	bk.flushing = true
	go l.flush(agent, bk)
}

// flush writes what the agent's book holds until it holds nothing more: each
// round takes every waiting reservation and everything owed, applies them to
// the entry and writes it with compare-and-set (reading it again after a
// conflict with another writer), then answers the reservations.
func (l *Bus) flush(agent string, bk *book) {
	for {
		l.mu.Lock()
		waiting, budget := bk.waiting, bk.budget
		owed := make(map[int64]carry, len(bk.owed))
		for k, v := range bk.owed {
			owed[k] = v
		}
		bk.waiting = nil
		if len(waiting) == 0 && len(owed) == 0 {
			bk.flushing = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()

		err := l.write(agent, bk, budget, owed, waiting)

		l.mu.Lock()
		if err != nil && len(bk.owed) > 0 && bk.retry == nil {
			l.log.Warn("ledger: could not write what ended calls cost; trying again", "agent", agent, "err", err.Error())
			bk.retry = time.AfterFunc(retryOwed, func() {
				l.mu.Lock()
				defer l.mu.Unlock()
				bk.retry = nil
				l.kick(agent, bk)
			})
		}
		for _, w := range waiting {
			w.err = err
			if err != nil {
				w.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			w.adm.Pending = bk.pending
			switch {
			case err != nil || !w.adm.OK:
			case w.gone:
				// Nobody forwards it: the bound goes back.
				owe(bk.owed, w.adm.Reservation, 0)
			default:
				bk.pending += w.adm.Bound
			}
			close(w.done)
		}
		if err != nil && len(bk.owed) > 0 {
			bk.flushing = false // the retry timer starts the next round
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// write applies owed and the reservations to the agent's entry and writes
// it, reading the entry again after another writer's change.
func (l *Bus) write(agent string, bk *book, budget Budget, owed map[int64]carry, waiting []*waiter) error {
	kv, err := l.bucket()
	if err != nil {
		return err
	}
	ops := make([]*reserveOp, len(waiting))
	for i, w := range waiting {
		ops[i] = &w.reserveOp
	}
	reread := false
	for range maxConflicts {
		e, rev, seen, loaded := l.snapshot(bk)
		if !loaded {
			if err := l.read(kv, agent, bk); err != nil {
				return err
			}
			e, rev, seen, _ = l.snapshot(bk)
		}
		apply(&e, agent, l.now(), budget, owed, ops)
		if len(owed) == 0 && !admitsAny(ops) {
			// Only refusals: nothing to write. Unless the entry is old
			// news: then read it and decide again.
			if !reread && time.Since(seen) > refreshAfter {
				reread = true
				l.forget(bk)
				continue
			}
			return nil
		}
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var next uint64
		if rev == 0 {
			next, err = kv.Create(ctx, agent, data)
		} else {
			next, err = kv.Update(ctx, agent, data, rev)
		}
		cancel()
		if err == nil {
			// Stored and taken out of what is owed at once: Known never
			// counts a written settlement twice.
			l.mu.Lock()
			bk.entry, bk.rev, bk.loaded, bk.seen = e, next, true, time.Now()
			for epoch, c := range owed { // written: only what came since stays owed
				left := bk.owed[epoch]
				left.delta -= c.delta
				left.cost -= c.cost
				if left == (carry{}) {
					delete(bk.owed, epoch)
				} else {
					bk.owed[epoch] = left
				}
			}
			l.mu.Unlock()
			return nil
		}
		l.forget(bk) // read it again: another writer was first, or the write's fate is unknown
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		return err
	}
	return fmt.Errorf("entry of %s: %d writers' conflicts in a row", agent, maxConflicts)
}

// read loads the agent's entry into bk. A deleted or purged entry reads as
// none: the bus's own history holds no older total to fall back on.
func (l *Bus) read(kv jetstream.KeyValue, agent string, bk *book) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := kv.Get(ctx, agent)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		l.store(bk, protocol.LedgerEntry{}, 0)
		return nil
	}
	if err != nil {
		return err
	}
	var e protocol.LedgerEntry
	if err := json.Unmarshal(got.Value(), &e); err != nil || e.Agent != agent {
		// Fail closed: an entry nobody can read is no licence to spend.
		return fmt.Errorf("the entry of %s is not a ledger entry (flock-agent budget reset %s writes a new one)", agent, agent)
	}
	l.store(bk, e, got.Revision())
	return nil
}

// store keeps what was read or written. Known reads beside the writer: a
// read it stores may be older than the writer's last write, and then the
// writer's next compare-and-set fails and reads the entry again. (No
// revision guard: a bucket made again starts its revisions over.)
func (l *Bus) store(bk *book, e protocol.LedgerEntry, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk.entry, bk.rev, bk.loaded, bk.seen = e, rev, true, time.Now()
}

// snapshot is the book's entry as last read or written.
func (l *Bus) snapshot(bk *book) (e protocol.LedgerEntry, rev uint64, seen time.Time, loaded bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bk.entry, bk.rev, bk.seen, bk.loaded
}

// forget has the next write read the entry first.
func (l *Bus) forget(bk *book) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bk.loaded = false
}

func admitsAny(ops []*reserveOp) bool {
	for _, op := range ops {
		if op.adm.OK {
			return true
		}
	}
	return false
}

// bucket binds the bucket, once it can.
func (l *Bus) bucket() (jetstream.KeyValue, error) {
	l.mu.Lock()
	kv := l.kv
	l.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	kv, err := l.js.KeyValue(ctx, protocol.LedgerBucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", protocol.LedgerBucket, err)
	}
	l.mu.Lock()
	l.kv = kv
	l.mu.Unlock()
	return kv, nil
}
