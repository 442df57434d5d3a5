package board

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// Options tune the service; the zero value is what the bus runs with.
type Options struct {
	Now        func() time.Time // the clock leases are read against (time.Now)
	SweepEvery time.Duration    // how often leases and blocked tasks are checked (DefaultSweepEvery)
	Workers    int              // requests handled at once (DefaultWorkers)
	// Each agent's requests (admission.go): at most AgentRate a second,
	// in bursts of AgentBurst, and AgentInFlight waiting or being answered
	// at once (DefaultAgentRate, DefaultAgentBurst, DefaultAgentInFlight).
	AgentRate     float64
	AgentBurst    int
	AgentInFlight int
}

// Defaults of Options.
const (
	DefaultSweepEvery = time.Second
	DefaultWorkers    = 16
)

// Pacing and bounds of the service.
const (
	requestTimeout = 10 * time.Second         // one request, all its reads and writes
	maxConflicts   = 8                        // compare-and-set retries of one task's write
	maxClaimTries  = 32                       // tasks a claim tries before it says "conflict"
	maxValueBytes  = protocol.BoardValueBytes // a task's entry (the bucket's MaxValueSize)
	maxBodyBytes   = 64 << 10                 // a request's body, but apply's (bounded by the bus's max payload)
	callerStripes  = 64
	pendingMsgs    = 64 << 10 // requests the subscription holds for the handler
	pendingBytes   = 16 << 20
)

// Service is the board service one bus node runs: it answers the board's
// request subjects in the queue group protocol.BoardQueueGroup (every node
// serves, one answers each request) and sweeps expired leases. Its
// view of the bucket is a cache a watcher keeps current; every write is a
// compare-and-set on the entry's revision, so nodes (and concurrent
// requests on one node) never overwrite each other's transitions.
type Service struct {
	nc     *nats.Conn
	log    *slog.Logger
	opt    Options
	st     *store
	obj    jetstream.ObjectStore // the artifacts; nil when the bus keeps none
	js     jetstream.JetStream
	agents atomic.Pointer[map[string]protocol.BoardAgent]
	keep   atomic.Int64 // how long a finished plan stays (protocol.BoardConfig.KeepFinished), ns
	leaseD atomic.Int64 // how long a claim lasts unrenewed (protocol.BoardConfig.Lease), ns
	quiet  quietWindow  // no lease expires before this: a lease after the service (re)connected
	pruned time.Time    // when the sweeper last looked for finished plans (its goroutine only)

	// One caller's claims and adds, one at a time on this node: its claim
	// limit and add quota are counted, then kept, under the lock.
	callers [callerStripes]sync.Mutex

	// Tasks a claim on this node is writing: the claims beside it pick
	// others rather than lose the same compare-and-set (claim.go).
	pickMu  sync.Mutex
	picking map[string]int // key -> claims writing it

	// Promotions under way on this node (hold.go).
	promMu    sync.Mutex
	promoting map[string]*promotion

	subs     []*nats.Subscription
	adm      *admission // every caller's lane, served in turn by the workers (Options.Workers goroutines)
	workers  sync.WaitGroup
	ring     chan struct{} // a task became ready: ring protocol.SubjectBoardReady (coalesced)
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	stopOnce sync.Once
}

// Serve binds the board's bucket (protocol.BoardBucket, which the bus's
// topology declares), loads it, and starts answering requests and sweeping.
// ctx bounds the start only. nc must be allowed everything the service does
// (the bus's own admin connection).
func Serve(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg protocol.BoardConfig, log *slog.Logger, opt Options) (*Service, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.SweepEvery <= 0 {
		opt.SweepEvery = DefaultSweepEvery
	}
	if opt.Workers <= 0 {
		opt.Workers = DefaultWorkers
	}
	if opt.AgentRate <= 0 {
		opt.AgentRate = DefaultAgentRate
	}
	if opt.AgentBurst <= 0 {
		opt.AgentBurst = max(DefaultAgentBurst, int(opt.AgentRate))
	}
	if opt.AgentInFlight <= 0 {
		opt.AgentInFlight = DefaultAgentInFlight
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, protocol.BoardBucket)
	if err != nil {
		return nil, fmt.Errorf("board: bucket %s: %w", protocol.BoardBucket, err)
	}
	obj, err := js.ObjectStore(ctx, protocol.ArtifactBucket)
	if err != nil {
		log.Warn("board: no artifact store: put and get are refused", "store", protocol.ArtifactBucket, "err", err)
		obj = nil
	}
	run, cancel := context.WithCancel(context.Background())
	s := &Service{obj: obj, js: js, nc: nc, log: log, opt: opt, adm: newAdmission(opt), ring: make(chan struct{}, 1), cancel: cancel, picking: map[string]int{}, promoting: map[string]*promotion{}}
	s.SetConfig(cfg)
	if s.st, err = openStore(ctx, run, kv, log, &s.bg); err != nil {
		cancel()
		s.bg.Wait()
		return nil, err
	}
	s.quiet.allows(s.now(), nc, s.lease()) // the first lease after the start holds expiries back
	s.workers.Add(opt.Workers)
	for range opt.Workers {
		go s.work()
	}
	for _, subj := range []string{protocol.SubjectBoardAgentRequests, protocol.SubjectBoardOperator} {
		sub, err := nc.QueueSubscribe(subj, protocol.BoardQueueGroup, s.onRequest)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("board: subscribe %s: %w", subj, err)
		}
		// The handler never waits (admission.go), so little waits here;
		// a bound keeps a burst the handler cannot keep up with from
		// growing the services' memory (past it the client drops, and
		// the error handler says so).
		if err := sub.SetPendingLimits(pendingMsgs, pendingBytes); err != nil {
			s.Stop()
			return nil, fmt.Errorf("board: subscribe %s: %w", subj, err)
		}
		s.subs = append(s.subs, sub)
	}
	fctx, fcancel := context.WithTimeout(ctx, requestTimeout)
	defer fcancel()
	if err := nc.FlushWithContext(fctx); err != nil {
		s.Stop()
		return nil, fmt.Errorf("board: %w", err)
	}
	s.bg.Add(2)
	go s.sweepLoop(run)
	go s.ringLoop(run)
	log.Info("board service started", "tasks", s.st.count(), "agents", len(cfg.Agents))
	return s, nil
}

// Dead is closed if the service's view of the bucket stopped following it
// (its watcher ended under it): its answers would go stale, so whoever runs
// it should stop and start again.
func (s *Service) Dead() <-chan struct{} { return s.st.dead }

// SetConfig replaces what the service knows of the agents (a reload of the
// topology): labels, claim limits and add quotas count from the next request.
func (s *Service) SetConfig(cfg protocol.BoardConfig) {
	m := make(map[string]protocol.BoardAgent, len(cfg.Agents))
	for _, a := range cfg.Agents {
		m[a.ID] = a
	}
	s.agents.Store(&m)
	keep := time.Duration(cfg.KeepFinished)
	if keep == 0 {
		keep = protocol.DefaultBoardKeepFinished
	}
	s.keep.Store(int64(keep))
	lease := time.Duration(cfg.Lease)
	if lease <= 0 {
		lease = protocol.DefaultBoardLease
	}
	s.leaseD.Store(int64(lease))
}

// agent is what the board knows of agent id, its defaults filled in (an
// agent the topology does not list yet: no labels, the default limits).
func (s *Service) agent(id string) protocol.BoardAgent {
	a := (*s.agents.Load())[id]
	a.ID = id
	if a.ClaimLimit <= 0 {
		a.ClaimLimit = protocol.DefaultBoardClaimLimit
	}
	if a.AddQuota == nil || *a.AddQuota < 0 {
		q := protocol.DefaultBoardAddQuota
		a.AddQuota = &q
	}
	return a
}

// Stop stops taking requests, answers those already taken, and stops the
// sweeper and the watcher. Safe to call more than once; the connection
// stays open (it is the caller's).
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		for _, sub := range s.subs {
			if s.nc.IsConnected() {
				_ = sub.Drain()
			} else {
				// A drain needs the bus; with the bus away nothing taken
				// could be answered anyway: stop at once.
				_ = sub.Unsubscribe()
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for _, sub := range s.subs {
			for sub.IsValid() && time.Now().Before(deadline) && !s.nc.IsClosed() {
				time.Sleep(5 * time.Millisecond)
			}
		}
		s.adm.stop() // the workers answer what waits, then end
		s.workers.Wait()
		s.cancel()
		s.bg.Wait()
		s.log.Info("board service stopped")
	})
}

// onRequest sorts a request into its caller's lane (admission.go), or
// refuses it at once when the caller is past its bounds. It never waits.
func (s *Service) onRequest(m *nats.Msg) {
	caller, op, ok := protocol.BoardCaller(m.Subject)
	if !ok {
		s.log.Warn("board: request on a subject that names no caller", "subject", m.Subject)
		return
	}
	now := time.Now()
	why, answer, ln := s.adm.admit(caller, m, now)
	if why == queued || why == stopping {
		return
	}
	if n := s.adm.droppedSince(ln, now); n > 0 {
		s.log.Warn("board: a caller past its bounds: refusals not answered", "caller", caller, "times", n, "rate", s.opt.AgentRate, "in_flight", s.opt.AgentInFlight)
	}
	if !answer {
		return
	}
	var be *protocol.BoardError
	if why == overRate {
		be = &protocol.BoardError{Code: protocol.BoardErrBusy, Msg: fmt.Sprintf("%s is over its %g requests a second to the board (bursts of %d): ask again in a moment", caller, s.opt.AgentRate, s.opt.AgentBurst)}
	} else {
		bound := s.opt.AgentInFlight
		if caller == protocol.OperatorUser {
			bound = operatorInFlight
		}
		be = &protocol.BoardError{Code: protocol.BoardErrBusy, Msg: fmt.Sprintf("%s has %d requests waiting or being answered, its bound: wait for their answers", caller, bound)}
	}
	s.respond(m, caller, op, &protocol.BoardReply{Error: be.Msg, Code: be.Code})
}

// work answers requests, each lane's in turn, until Stop.
func (s *Service) work() {
	defer s.workers.Done()
	for {
		m, ln, ok := s.adm.next()
		if !ok {
			return
		}
		s.handle(m)
		s.adm.done(ln)
	}
}

// Stalled reports requests that wait with no worker taking one: a board
// that is stuck (its health says so, for the supervisor to restart it).
func (s *Service) Stalled() (waiting int, d time.Duration) { return s.adm.stalled(time.Now()) }

// lockCaller serialises one caller's claims and adds on this node.
func (s *Service) lockCaller(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	mu := &s.callers[h.Sum32()%callerStripes]
	mu.Lock()
	return mu.Unlock
}

func (s *Service) now() time.Time { return s.opt.Now().UTC() }

// ringSoon asks the ring loop to ring protocol.SubjectBoardReady: many
// tasks that become ready together ring once.
func (s *Service) ringSoon() {
	select {
	case s.ring <- struct{}{}:
	default:
	}
}

func (s *Service) ringLoop(ctx context.Context) {
	defer s.bg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ring:
			if err := s.nc.Publish(protocol.SubjectBoardReady, nil); err != nil {
				s.log.Warn("board: ready not rung", "err", err)
			}
		}
	}
}

// Counts is this node's view of the board: its tasks by status, and how
// many each agent holds (for the flock's metrics).
func (s *Service) Counts() (byStatus, heldBy map[string]int) { return s.st.tally() }
