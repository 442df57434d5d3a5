package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
)

// Agent is one running agent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	start time.Time

	nc  *nats.Conn
	ncp atomic.Pointer[nats.Conn] // nc, for the status loop, which starts before the bus answers
	js  jetstream.JetStream

	// The bus as the agent last saw it: when it last answered a PING (unix
	// ns), how often the connection came back, and since when it is lost
	// (unix ns, 0 while connected). Reported in the status file,
	// heartbeats and events; never a reason to call the agent unhealthy.
	busConfirmed atomic.Int64
	reconnects   atomic.Uint64
	busLost      atomic.Int64
	lostCause    atomic.Value // string: why the connection was lost
	stopStatus   func()
	statusMu     sync.Mutex // orders the status file's writes

	keyFile  string        // FLOCK_NKEY_FILE for task processes (credentialFile)
	senders  *senderLimits // per-sender inbox bounds
	mail     *mailroom     // per-sender store queues
	untaken  *untaken      // each sender's untaken messages in the inbox directory
	stopMail func()        // stops taking mail from the mailbox

	slots     *slots
	inflight  sync.WaitGroup
	runCtx    context.Context    // parent of every task process; cancelled when the grace period ends
	runCancel context.CancelFunc // ...
	draining  atomic.Bool
	handback  atomic.Bool // grace period over: interrupted tasks are handed back (nak), not reported

	state     atomic.Value // string
	hbSeq     atomic.Uint64
	nudge     nudger // an extra heartbeat soon after a task starts
	completed atomic.Uint64
	failed    atomic.Uint64
	tasksDone atomic.Uint64

	env      []string // allow-listed environment for task processes
	tasksDir string
	inboxDir string
	inboxN   atomic.Uint64
	pruneReq chan string
	running  running // the tasks running now: never pruned, and in heartbeats

	boardHeld atomic.Value // string: the board task it runs now ("<plan>.<task>"), "" when none
	leaseNS   atomic.Int64 // the board's lease as it last said, ns (board_lease.go)
	programUp atomic.Bool  // its program runs now: its prompt claims are renewed
	stopBG    func()
}

// Run runs the agent until ctx ends (SIGTERM), then drains: it stops taking
// tasks, lets in-flight tasks finish within the grace period, hands back the
// ones that do not (they are redelivered), says goodbye and returns nil.
// It returns an error only when it cannot start (bad config, no credentials).
//
// A key file replaced while it runs (a rotated key) ends the session as a stop
// would, draining, and starts a new one with the new key in the same
// process: the container neither restarts nor uses up its restart budget.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		rotated, err := runSession(ctx, cfg, log)
		if err != nil || !rotated || ctx.Err() != nil {
			return err
		}
		log.Info("agent key replaced: starting again with the new key")
	}
}

// errKeyRotated ends a session whose key file now holds another key.
var errKeyRotated = errors.New("agent key replaced")

// runSession is one connection's life, from connect to drain. It reports
// whether it ended because the key was replaced.
func runSession(parent context.Context, cfg Config, log *slog.Logger) (rotated bool, err error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	defer func() { rotated = errors.Is(context.Cause(ctx), errKeyRotated) }()
	a := &Agent{
		cfg: cfg, log: log, start: time.Now(),
		slots:    newSlots(cfg.Concurrency),
		tasksDir: filepath.Join(cfg.AgentDir(), "tasks"),
		inboxDir: filepath.Join(cfg.AgentDir(), "inbox"),
		pruneReq: make(chan string, 4),
		senders:  newSenderLimits(cfg.InboxRate, cfg.InboxBytesRate),
		mail:     newMailroom(),
	}
	a.untaken = newUntaken(a.inboxDir)
	a.state.Store(protocol.StateStarting)
	a.boardHeld.Store("")
	a.env = allowedEnv(cfg.EnvAllow, os.Environ())
	for _, d := range []string{a.tasksDir, a.inboxDir, filepath.Join(a.inboxDir, TakenDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false, fmt.Errorf("agent directory: %w", err)
		}
	}
	nk, pub, err := nkeyOption(cfg)
	if err != nil {
		return false, err
	}
	if a.keyFile, err = credentialFile(cfg); err != nil {
		return false, err
	}
	if a.keyFile != cfg.NkeyFile {
		defer os.Remove(a.keyFile)
	} else {
		go watchKey(ctx, cfg.NkeyFile, pub, cfg.KeyCheck, func() { cancel(errKeyRotated) })
	}
	log.Info("agent starting", "url", cfg.URL, "concurrency", cfg.Concurrency, "dir", cfg.AgentDir(), "version", cfg.Version)

	// The status file says the runtime is alive from now on, bus or no bus:
	// the health check is about this process, not about the bus.
	statusCtx, cancelStatus := context.WithCancel(context.Background())
	statusDone := make(chan struct{})
	go func() { defer close(statusDone); a.statusLoop(statusCtx) }()
	a.stopStatus = func() { cancelStatus(); <-statusDone }
	defer func() {
		a.stopStatus()
		if f := cfg.StatusFile; f != "" && f != "-" {
			_ = os.Remove(f)
		}
	}()

	a.nc, err = a.connect(ctx, nk)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped before the bus answered")
			return false, nil
		}
		return false, err
	}
	defer a.nc.Close()
	a.ncp.Store(a.nc)
	a.confirm()
	if a.js, err = jetstream.New(a.nc); err != nil {
		return false, fmt.Errorf("jetstream: %w", err)
	}

	// Announce at once: the first heartbeat is the agent's "I am here".
	a.heartbeat()
	a.event(protocol.EventStarted, "", "connected to "+a.nc.ConnectedUrlRedacted())

	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	a.stopBG = func() { stopBG(); bgWG.Wait() }
	defer a.stopBG()
	bgWG.Add(2)
	go func() { defer bgWG.Done(); a.heartbeatLoop(bg) }()
	go func() { defer bgWG.Done(); a.pruneLoop(bg) }()

	subs, err := a.subscribeBroadcast()
	if err != nil {
		return false, err
	}
	logs, err := a.subscribeLogs()
	if err != nil {
		return false, err
	}
	subs = append(subs, logs)
	mailCtx, stopMail := context.WithCancel(context.Background())
	var mailDone sync.WaitGroup
	for _, stream := range []string{protocol.MailStream(cfg.ID), protocol.OperatorMailStream(cfg.ID)} {
		mailDone.Add(1)
		go func() { defer mailDone.Done(); a.mailLoop(mailCtx, stream) }()
	}
	a.stopMail = func() { stopMail(); mailDone.Wait() }

	a.runCtx, a.runCancel = context.WithCancel(context.Background())
	defer a.runCancel()
	own, err := a.lookup(ctx, protocol.StreamTasks, protocol.AgentConsumer(cfg.ID))
	if err != nil {
		// ctx ended while waiting for the bus to create the consumers.
		a.stop(subs)
		return false, nil
	}
	a.state.Store(protocol.StateReady)
	a.confirm()
	a.heartbeat()
	a.event(protocol.EventReady, "", fmt.Sprintf("taking tasks from consumer %s (its own, tasks.all and the pool tasks the bus gives it)", protocol.AgentConsumer(cfg.ID)))
	log.Info("agent ready")

	// What the agent held before this start is given back before it
	// claims anything (nor its program does).
	a.abandonClaims(ctx)
	dctx, stopDispatch := context.WithCancel(context.Background())
	var dWG sync.WaitGroup
	dWG.Add(2)
	go func() { defer dWG.Done(); a.holdLoop(dctx) }()
	go func() { defer dWG.Done(); a.ownLoop(dctx, own) }()
	if !cfg.NoBoard {
		// The board's run tasks, in the slots the consumer leaves free.
		dWG.Add(1)
		go func() { defer dWG.Done(); a.boardLoop(dctx) }()
	}

	// The agent program, if there is one, runs while the agent takes tasks.
	pctx, stopProgram := context.WithCancel(context.Background())
	programDone := make(chan struct{})
	if len(cfg.Program) > 0 {
		go func() { defer close(programDone); a.superviseProgram(pctx) }()
	} else {
		close(programDone)
	}

	<-ctx.Done()

	// Drain.
	a.draining.Store(true)
	a.state.Store(protocol.StateDraining)
	a.heartbeat()
	a.event(protocol.EventDraining, "", fmt.Sprintf("%d task(s) in flight, grace period %s", a.slots.running(), cfg.Grace))
	log.Info("draining", "running", a.slots.running(), "grace", cfg.Grace.String())
	stopProgram() // SIGTERM now; it has the same grace period as the tasks
	stopDispatch()
	dWG.Wait()
	done := make(chan struct{})
	go func() { a.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.Grace):
		log.Warn("grace period over: handing back unfinished tasks", "running", a.slots.running())
		a.handback.Store(true)
		a.runCancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			log.Error("tasks did not stop after being killed")
		}
	}
	<-programDone
	a.stop(subs)
	return false, nil
}

// stop says goodbye and drains the connection.
func (a *Agent) stop(subs []*nats.Subscription) {
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	a.stopMail()   // mail not yet taken stays in the mailbox
	a.mail.close() // broadcasts already taken are stored and confirmed
	a.stopBG()
	a.stopStatus()
	a.state.Store(protocol.StateStopped)
	a.heartbeat()
	a.event(protocol.EventStopped, "", fmt.Sprintf("completed %d task(s)", a.completed.Load()))
	if err := a.nc.FlushTimeout(2 * time.Second); err != nil {
		a.log.Warn("could not flush last messages", "err", err)
	}
	closed := make(chan struct{})
	a.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := a.nc.Drain(); err == nil {
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
		}
	}
	_ = os.Remove(a.cfg.StatusFile)
	a.log.Info("agent stopped", "completed", a.completed.Load(), "failed", a.failed.Load())
}
