package board

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/ai-flock/ai-flock/protocol"
)

// Admission: every caller's requests wait in a lane of their own, and the
// workers serve the lanes in turn, one request of each, so that no caller
// can make another wait behind its own requests. An agent's lane admits
// at most Options.AgentRate requests a second (bursts of AgentBurst) and
// holds at most AgentInFlight at once, waiting or being answered; past
// either bound the request is refused at once (protocol.BoardErrBusy),
// naming the bound, without touching the board; Client asks again after a
// pause. The operator's lane has no rate and a wider bound.
// The subscription's handler only sorts requests into lanes, never waits,
// so the bus's deliveries to the services do not pile up behind a busy
// board either.
//
// A refusal is itself a reply: a flood would have the board answer it as
// often as it asks. Each lane answers refusals at the caller's own rate at
// most (a well-behaved client hears why and slows down); the rest are
// dropped, counted, and logged once a minute per caller.

// Defaults of the admission bounds (Options).
const (
	DefaultAgentRate     = 20 // requests a second, each agent
	DefaultAgentBurst    = 40
	DefaultAgentInFlight = 4  // an agent's requests waiting or being answered
	operatorInFlight     = 64 // the operator's
)

// lane is one caller's queue.
type lane struct {
	caller  string
	queue   []*nats.Msg
	busy    int  // being answered
	ready   bool // in admission.ready
	limit   *rate.Limiter
	answers *rate.Limiter // refusals it may still answer
	dropped int           // refusals not answered since the last log line
	logged  time.Time
}

// admission holds the lanes and the order the workers serve them in.
type admission struct {
	mu       sync.Mutex
	cond     *sync.Cond
	lanes    map[string]*lane
	ready    []*lane // lanes with a request waiting, in turn
	stopped  bool
	rate     rate.Limit
	burst    int
	inFlight int
	queued   int       // requests waiting in every lane
	progress time.Time // the last time a worker took a request, or a request found none waiting
}

func newAdmission(opt Options) *admission {
	a := &admission{lanes: map[string]*lane{}, rate: rate.Limit(opt.AgentRate), burst: opt.AgentBurst, inFlight: opt.AgentInFlight}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// admitted is what admit decided for one request.
type admitted int

const (
	queued    admitted = iota // in its lane
	overRate                  // refused: over the caller's rate
	overLimit                 // refused: the caller has its bound of requests in flight
	stopping                  // the service stops: dropped
)

// admit sorts m into its caller's lane, or says why not. answer reports
// whether a refusal should be answered (the lane's refusal allowance).
func (a *admission) admit(caller string, m *nats.Msg, now time.Time) (why admitted, answer bool, ln *lane) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return stopping, false, nil
	}
	ln = a.lanes[caller]
	if ln == nil {
		ln = &lane{caller: caller, answers: rate.NewLimiter(a.rate, a.burst)}
		if caller != protocol.OperatorUser {
			ln.limit = rate.NewLimiter(a.rate, a.burst)
		}
		a.lanes[caller] = ln
	}
	bound := a.inFlight
	if caller == protocol.OperatorUser {
		bound = operatorInFlight
	}
	switch {
	case len(ln.queue)+ln.busy >= bound:
		why = overLimit
	case ln.limit != nil && !ln.limit.AllowN(now, 1):
		why = overRate
	default:
		ln.queue = append(ln.queue, m)
		if a.queued == 0 {
			a.progress = now
		}
		a.queued++
		if !ln.ready {
			ln.ready = true
			a.ready = append(a.ready, ln)
		}
		a.cond.Signal()
		return queued, false, ln
	}
	if ln.answers.AllowN(now, 1) {
		return why, true, ln
	}
	ln.dropped++
	return why, false, ln
}

// next waits for a request to answer: the first of the next lane in turn.
// It returns false once the admission is stopped and no request waits.
func (a *admission) next() (*nats.Msg, *lane, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.ready) == 0 {
		if a.stopped {
			return nil, nil, false
		}
		a.cond.Wait()
	}
	ln := a.ready[0]
	a.ready = a.ready[1:]
	m := ln.queue[0]
	ln.queue[0] = nil
	ln.queue = ln.queue[1:]
	ln.busy++
	if len(ln.queue) > 0 {
		a.ready = append(a.ready, ln) // its next request waits for its next turn
	} else {
		ln.ready = false
	}
	a.queued--
	a.progress = time.Now()
	return m, ln, true
}

// done says a request of ln was answered.
func (a *admission) done(ln *lane) {
	a.mu.Lock()
	ln.busy--
	a.mu.Unlock()
}

// stop wakes the workers: they answer what waits, then end.
func (a *admission) stop() {
	a.mu.Lock()
	a.stopped = true
	a.cond.Broadcast()
	a.mu.Unlock()
}

// stalled is how long requests have waited with no worker taking one (0
// when none waits).
func (a *admission) stalled(now time.Time) (waiting int, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queued == 0 {
		return 0, 0
	}
	return a.queued, now.Sub(a.progress)
}

// dropped takes ln's count of refusals not answered, if a minute has
// passed since it was last taken (for the log).
func (a *admission) droppedSince(ln *lane, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ln.dropped == 0 || now.Sub(ln.logged) < time.Minute {
		return 0
	}
	n := ln.dropped
	ln.dropped, ln.logged = 0, now
	return n
}
