package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// What the gateway reads of the bus ledger without writing: the entries as
// it knows them, what it holds pending, and the wait for its last writes.

// Known is the agent's entry as this gateway last wrote or read it, with
// what its settled calls owe it and the writer has yet to write (a call
// settled is never counted at its bound); one that says the agent is over
// its limit is read again first if it was seen more than refreshAfter ago.
func (l *Bus) Known(agent string, b Budget) protocol.LedgerEntry {
	l.mu.Lock()
	bk := l.bookOf(agent)
	e, seen := l.owing(agent, bk, b)
	l.mu.Unlock()
	if e.Limit() > 0 && e.Spent >= e.Limit() && time.Since(seen) > refreshAfter {
		if kv, err := l.bucket(); err == nil && l.read(kv, agent, bk) == nil {
			l.mu.Lock()
			e, _ = l.owing(agent, bk, b)
			l.mu.Unlock()
		}
	}
	return e
}

// owing is the book's entry with what is owed applied, brought up to now
// and b, and when it was last read or written. l.mu is held.
func (l *Bus) owing(agent string, bk *book, b Budget) (protocol.LedgerEntry, time.Time) {
	e := bk.entry
	apply(&e, agent, l.now(), b, bk.owed, nil)
	return e, bk.seen
}

// Pending is the bounds this gateway reserved for agent's calls and has not
// settled.
func (l *Bus) Pending(agent string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bk := l.books[agent]; bk != nil {
		return bk.pending
	}
	return 0
}

// Drain waits until what ended calls owe is written (or ctx ends): a
// gateway shutting down calls it after its last call, before it closes the
// connection.
func (l *Bus) Drain(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		busy := 0
		for _, bk := range l.books {
			if bk.flushing || len(bk.owed) > 0 {
				busy++
			}
		}
		l.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ledger: %d agents' costs not written: %w", busy, ctx.Err())
		case <-tick.C:
		}
	}
}
