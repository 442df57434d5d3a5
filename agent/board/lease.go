package board

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// A claim has two clocks, as a Temporal activity has a heartbeat timeout
// beside its start-to-close one: its lease says its holder is alive (it
// lasts protocol.BoardConfig.Lease unrenewed, 30 s by default, and the
// holder's runtime renews every claim it holds well within it), and its
// deadline, claimed at plus the task's timeout, bounds the whole run
// whatever the renewals. A holder that dies loses its claims within one
// lease; a task that runs past its timeout fails.

// lease is how long a claim lasts unrenewed.
func (s *Service) lease() time.Duration { return time.Duration(s.leaseD.Load()) }

// leaseEnd is when t's claim ends unless renewed again, renewed at now:
// a lease from now, never past its deadline.
func (s *Service) leaseEnd(t protocol.BoardTask, now time.Time) time.Time {
	end := now.Add(s.lease())
	if d := protocol.BoardDeadline(t); !d.IsZero() && d.Before(end) {
		return d
	}
	return end
}

// renewed is t renewed by its holder at now.
func (s *Service) renewed(t protocol.BoardTask, now time.Time) (protocol.BoardTask, error) {
	if d := protocol.BoardDeadline(t); !d.IsZero() && !now.Before(d) {
		return t, refuse(protocol.BoardErrLimit, "task %s ran past its timeout of %s (claimed at %s): the board ends it", t.Key(), timeout(t), t.ClaimedAt.Format(time.RFC3339))
	}
	t.RenewedAt, t.LeaseUntil = now, s.leaseEnd(t, now)
	return t, nil
}

// renewAll renews every claim caller holds (of req.Kind when named): what
// an agent's runtime sends while it is alive. Claims the view does not show
// yet (made a moment ago on another node) are renewed by the next one. The
// reply lists the claims renewed, without their prompts and commands (a
// reply stays small whatever the claim limit).
func (s *Service) renewAll(ctx context.Context, caller string, req protocol.BoardRequest) (*protocol.BoardReply, error) {
	rep := &protocol.BoardReply{Lease: protocol.Duration(s.lease()), Tasks: []protocol.BoardTask{}}
	for _, h := range s.heldBy(caller, req.Kind) {
		t, err := s.change(ctx, h.Key(), func(t protocol.BoardTask) (protocol.BoardTask, error) {
			if t.Status != protocol.BoardClaimed || t.Holder != caller {
				return t, errUnchanged // finished, released or expired meanwhile
			}
			return s.renewed(t, s.now())
		})
		if err != nil || t.Status != protocol.BoardClaimed || t.Holder != caller {
			continue // not renewed: it is not in the reply, and its holder learns so
		}
		rep.Tasks = append(rep.Tasks, slim(t))
	}
	return rep, nil
}

// abandon gives back every claim caller holds, each attempt counted: what
// an agent's runtime sends when it starts, holding nothing yet. A task out
// of attempts fails (one that kills its agent each time does not run for
// ever). The reply lists the tasks given back, as they are now.
func (s *Service) abandon(ctx context.Context, caller string) (*protocol.BoardReply, error) {
	rep := &protocol.BoardReply{Lease: protocol.Duration(s.lease()), Tasks: []protocol.BoardTask{}}
	held, err := s.heldInBucket(ctx, caller)
	if err != nil {
		return nil, err
	}
	for _, h := range held {
		t, err := s.change(ctx, h.Key(), func(t protocol.BoardTask) (protocol.BoardTask, error) {
			if t.Status != protocol.BoardClaimed || t.Holder != caller {
				return t, errUnchanged
			}
			return s.takeBack(t, fmt.Sprintf("abandoned: %s started again while holding it", caller)), nil
		})
		if err != nil {
			return nil, err
		}
		if t.Holder != caller {
			rep.Tasks = append(rep.Tasks, slim(t))
		}
	}
	return rep, nil
}

// takeBack is claimed task t given back for why: ready again with its
// attempt counted, or failed when that was its last.
func (s *Service) takeBack(t protocol.BoardTask, why string) protocol.BoardTask {
	if t.Attempts >= maxAttempts(t) {
		t.Status = protocol.BoardFailed
		t.Reason = bounded(fmt.Sprintf("%s; out of attempts (%d of %d)", why, t.Attempts, maxAttempts(t)))
	} else {
		t.Status, t.Holder, t.Reason = protocol.BoardReady, "", bounded(fmt.Sprintf("%s (attempt %d of %d)", why, t.Attempts, maxAttempts(t)))
	}
	t.LeaseUntil = time.Time{}
	return t
}

// heldBy is what the view says caller holds (of kind, when not empty).
func (s *Service) heldBy(caller, kind string) []protocol.BoardTask {
	return s.st.withStatus(protocol.BoardClaimed, func(t protocol.BoardTask) bool {
		return t.Holder == caller && (kind == "" || t.Kind() == kind)
	})
}

// heldInBucket is what caller holds as the view says, each confirmed by
// the bucket; the view may lag a claim another node wrote a moment ago,
// which an abandon then misses: its lease ends it.
func (s *Service) heldInBucket(ctx context.Context, caller string) ([]protocol.BoardTask, error) {
	var out []protocol.BoardTask
	for _, t := range s.heldBy(caller, "") {
		cur, ok, err := s.st.fetch(ctx, t.Key())
		if err != nil {
			return nil, err
		}
		if ok && cur.Status == protocol.BoardClaimed && cur.Holder == caller {
			out = append(out, cur)
		}
	}
	return out, nil
}

// slim is t without what the holder already has (its prompt, command and
// result): a renew-all's or an abandon's reply names claims, and stays
// small.
func slim(t protocol.BoardTask) protocol.BoardTask {
	return protocol.BoardTask{
		V: t.V, Plan: t.Plan, BoardTaskSpec: protocol.BoardTaskSpec{ID: t.ID, Timeout: t.Timeout, Attempts: t.BoardTaskSpec.Attempts},
		Status: t.Status, Attempts: t.Attempts, Holder: t.Holder, Reason: t.Reason,
		LeaseUntil: t.LeaseUntil, ClaimedAt: t.ClaimedAt, RenewedAt: t.RenewedAt,
		CreatedBy: t.CreatedBy, Created: t.Created, Updated: t.Updated, Revision: t.Revision,
	}
}

// expiryReason says why a claim ended at now: its run went past its
// timeout, or its holder went silent for a lease.
func expiryReason(t protocol.BoardTask, now time.Time, lease time.Duration) (why string, timedOut bool) {
	if d := protocol.BoardDeadline(t); !d.IsZero() && !now.Before(d) {
		return fmt.Sprintf("timed out: held by %s since %s, past its timeout of %s", t.Holder, t.ClaimedAt.Format(time.RFC3339), timeout(t)), true
	}
	last := t.RenewedAt
	if last.IsZero() {
		last = t.LeaseUntil.Add(-lease)
	}
	return fmt.Sprintf("lease expired: its holder %s silent for %s (the lease is %s)", t.Holder, now.Sub(last).Round(time.Second), lease), false
}

// quietWindow holds back every lease's expiry for a lease after the
// service's link to the bus (re)connected: while the services or the bus
// were away no holder could renew, and taking every claim back then would
// run every task twice. The sweep asks it each time.
type quietWindow struct {
	mu         sync.Mutex
	connected  bool
	reconnects uint64
	until      time.Time
}

// link is what the window reads of the service's connection.
type link interface {
	IsConnected() bool
	Stats() nats.Statistics
}

// allows reports whether leases may expire at now.
func (q *quietWindow) allows(now time.Time, nc link, lease time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !nc.IsConnected() {
		q.connected = false
		return false
	}
	if r := nc.Stats().Reconnects; !q.connected || r != q.reconnects {
		q.connected, q.reconnects, q.until = true, r, now.Add(lease)
	}
	return !now.Before(q.until)
}

// QuietFor is how long the service still holds back expiries (0: none).
func (s *Service) QuietFor() time.Duration {
	s.quiet.mu.Lock()
	defer s.quiet.mu.Unlock()
	return max(s.quiet.until.Sub(s.now()), 0)
}
