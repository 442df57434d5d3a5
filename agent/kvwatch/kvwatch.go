// Package kvwatch follows a JetStream key-value watcher: the one loop the
// board's view, the services' configuration and the operator's budget watch
// share, so each says only what an entry means to it.
package kvwatch

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow hands each of w's entries (puts, deletes and purges alike) to
// entry, in order, and calls loaded (if set) once, when the entries the
// bucket held as the watch began have all come. It returns when ctx ends
// (false) or when the watcher stops while ctx is live (true: the caller's
// view of the bucket is no longer kept current). It does not stop w.
func Follow(ctx context.Context, w jetstream.KeyWatcher, entry func(jetstream.KeyValueEntry), loaded func()) (stopped bool) {
	initial := true
	for {
		select {
		case <-ctx.Done():
			return false
		case e, ok := <-w.Updates():
			if !ok {
				return ctx.Err() == nil
			}
			if e == nil { // the marker after the initial entries
				if initial && loaded != nil {
					loaded()
				}
				initial = false
				continue
			}
			entry(e)
		}
	}
}
