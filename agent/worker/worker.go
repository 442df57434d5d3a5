package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

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

	keyFile string        // FLOCK_NKEY_FILE for task processes (credentialFile)
	senders *senderLimits // per-sender inbox bounds
	mail    *mailroom     // per-sender store queues

	slots     *slots
	inflight  sync.WaitGroup
	runCtx    context.Context    // parent of every task process; cancelled when the grace period ends
	runCancel context.CancelFunc // ...
	draining  atomic.Bool
	handback  atomic.Bool // grace period over: interrupted tasks are handed back (nak), not reported

	state     atomic.Value // string
	hbSeq     atomic.Uint64
	completed atomic.Uint64
	failed    atomic.Uint64
	tasksDone atomic.Uint64

	env      []string // allow-listed environment for task processes
	tasksDir string
	inboxDir string
	inboxN   atomic.Uint64
	pruneReq chan string
	running  sync.Map // task IDs running now (never pruned)
	stopBG   func()
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
	a.state.Store(protocol.StateStarting)
	a.env = allowedEnv(cfg.EnvAllow, os.Environ())
	for _, d := range []string{a.tasksDir, a.inboxDir} {
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

	subs, err := a.subscribeMessages()
	if err != nil {
		return false, err
	}

	a.runCtx, a.runCancel = context.WithCancel(context.Background())
	defer a.runCancel()
	own, err := a.lookup(ctx, protocol.AgentConsumer(cfg.ID))
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

	dctx, stopDispatch := context.WithCancel(context.Background())
	var dWG sync.WaitGroup
	dWG.Add(1)
	go func() { defer dWG.Done(); a.ownLoop(dctx, own) }()

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
	a.mail.close() // messages already taken are stored and confirmed
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

// connect dials the bus until it answers, backing off up to 5 s between tries.
func (a *Agent) connect(ctx context.Context, nk nats.Option) (*nats.Conn, error) {
	log := a.log
	opts := []nats.Option{
		nk,
		nats.Name("flock-agent/" + a.cfg.ID),
		nats.CustomInboxPrefix(protocol.InboxPrefix(a.cfg.ID)),
		nats.Timeout(2 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(8 << 20), // bounded: publishes beyond it fail rather than grow memory
		nats.PingInterval(20 * time.Second),
		// Bound every drain: with the bus gone, a drain would otherwise wait
		// nats.go's default 30 s and the engine's stop timeout would SIGKILL us.
		nats.DrainTimeout(3 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if a.state.Load() == protocol.StateStopped { // our own goodbye
				return
			}
			cause := "connection closed"
			if err != nil {
				cause = err.Error()
			}
			if a.busLost.CompareAndSwap(0, time.Now().UnixNano()) {
				a.lostCause.Store(cause)
			}
			log.Warn("bus connection lost", "err", cause)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			a.reconnects.Add(1)
			detail := ""
			if lost := a.busLost.Swap(0); lost != 0 {
				detail = fmt.Sprintf("bus unreachable for %s (%v)", time.Since(time.Unix(0, lost)).Round(time.Millisecond), a.lostCause.Load())
			}
			log.Info("bus connection back", "url", nc.ConnectedUrlRedacted(), "detail", detail)
			a.confirm()
			a.heartbeat()
			a.event(protocol.EventReconnected, "", detail)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("bus error", "subject", subj, "err", err)
		}),
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(a.cfg.URL, opts...)
		if err == nil {
			log.Info("connected", "url", nc.ConnectedUrlRedacted(), "attempt", attempt)
			return nc, nil
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		log.Warn("bus not reachable yet", "url", a.cfg.URL, "attempt", attempt, "err", err, "retry_in", wait.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// lookup finds a consumer the bus creates; it waits for it if the bus has
// not yet.
func (a *Agent) lookup(ctx context.Context, name string) (jetstream.Consumer, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := a.js.Consumer(cctx, protocol.StreamTasks, name)
		cancel()
		if err == nil {
			return c, nil
		}
		a.log.Warn("task consumer not available yet", "consumer", name, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// heartbeat publishes the agent's status on agent.<id>.heartbeat.
func (a *Agent) heartbeat() {
	hb := protocol.Heartbeat{
		V: protocol.Version, Agent: a.cfg.ID, Seq: a.hbSeq.Add(1), Time: time.Now().UTC(),
		State: a.state.Load().(string), UptimeMS: time.Since(a.start).Milliseconds(),
		IntervalMS: a.cfg.Heartbeat.Milliseconds(), Running: a.slots.running(),
		Completed: a.completed.Load(), Failed: a.failed.Load(),
		Concurrency: a.cfg.Concurrency, Version: a.cfg.Version,
		Reconnects: a.reconnects.Load(),
	}
	b, _ := json.Marshal(hb)
	if err := a.nc.Publish(protocol.HeartbeatSubject(a.cfg.ID), b); err != nil {
		a.log.Warn("heartbeat not sent", "err", err)
	}
}

func (a *Agent) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.heartbeat()
		}
	}
}

// event publishes a lifecycle event on agent.<id>.events.
func (a *Agent) event(typ, ref, detail string) {
	b, _ := json.Marshal(protocol.Event{V: protocol.Version, Agent: a.cfg.ID, Time: time.Now().UTC(), Type: typ, Ref: ref, Detail: detail})
	if err := a.nc.Publish(protocol.EventsSubject(a.cfg.ID), b); err != nil {
		a.log.Warn("event not sent", "type", typ, "err", err)
	}
}

// statusLoop writes the status file every StatusEvery from the session's
// start to its end, and checks the bus (a PING answered) on the way: the
// file says the runtime is alive, and how its bus is.
func (a *Agent) statusLoop(ctx context.Context) {
	every := min(StatusEvery, max(a.cfg.Heartbeat, 100*time.Millisecond))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		a.confirm()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// confirm pings the bus if the agent is connected (remembering when it
// answered), then writes the status file.
func (a *Agent) confirm() {
	if nc := a.ncp.Load(); nc != nil && nc.IsConnected() && nc.FlushTimeout(2*time.Second) == nil {
		a.busConfirmed.Store(time.Now().UnixNano())
	}
	st := status{State: a.state.Load().(string), Bus: busUnreachable}
	if nc := a.ncp.Load(); nc != nil && nc.IsConnected() {
		st.Bus = busConnected
	}
	if c := a.busConfirmed.Load(); c != 0 {
		st.BusConfirmed = time.Unix(0, c).UTC()
	}
	if err := writeStatus(a.cfg.StatusFile, st); err != nil {
		a.log.Warn("status file not written", "file", a.cfg.StatusFile, "err", err)
	}
}

// allowedEnv keeps the variables of environ named in allow ("NAME" or
// "PREFIX*"), and the gateway's (protocol.GatewayAgentVars) always.
func allowedEnv(allow []string, environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(protocol.GatewayAgentVars, name) {
			out = append(out, kv)
			continue
		}
		if !ok || strings.HasPrefix(name, "FLOCK_") {
			continue
		}
		for _, p := range allow {
			if name == p || (strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*"))) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

var errHandback = errors.New("handed back")

// credentialFile is the file task processes are told holds the agent's key
// (FLOCK_NKEY_FILE), so that an agent program can act on the bus as its agent
// (`flock-agent mcp`). With the key in a file, that file; with the seed in
// the environment (Fargate), the seed written beside the status file (the
// container's private /run), owner-only, removed when the agent stops. Task
// processes run as the agent's user, so this gives them nothing the agent's
// own permissions do not already bound.
func credentialFile(cfg Config) (string, error) {
	if cfg.NkeySeed == "" {
		return cfg.NkeyFile, nil
	}
	f := filepath.Join(filepath.Dir(cfg.StatusFile), "flock-agent.nk")
	if err := writeAtomic(f, []byte(cfg.NkeySeed+"\n")); err != nil { // mode 0600 (CreateTemp)
		return "", fmt.Errorf("agent key for task processes: %w", err)
	}
	return f, nil
}

// nkeyOption authenticates with the seed from NATS_NKEY_SEED, or else from
// the NATS_NKEY_FILE file, and returns the public key it presents. The
// variable is removed from the agent's environment when the first session
// starts; task processes never saw it anyway (they get only allow-listed
// variables, and the key as a file: credentialFile).
func nkeyOption(cfg Config) (nats.Option, string, error) {
	if cfg.NkeySeed == "" {
		pub, err := filePublicKey(cfg.NkeyFile)
		if err != nil {
			return nil, "", err
		}
		// nats.go reads the file again to sign each connect: the seed is
		// not kept in memory.
		nk, err := nats.NkeyOptionFromSeed(cfg.NkeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("NATS_NKEY_FILE %s: %w", cfg.NkeyFile, err)
		}
		return nk, pub, nil
	}
	os.Unsetenv(protocol.EnvNkeySeed)
	kp, err := nkeys.FromSeed([]byte(cfg.NkeySeed))
	if err != nil {
		return nil, "", fmt.Errorf("NATS_NKEY_SEED: not an nkey seed")
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("NATS_NKEY_SEED: %w", err)
	}
	return nats.Nkey(pub, kp.Sign), pub, nil
}

// filePublicKey is the public key of the seed in a key file.
func filePublicKey(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("NATS_NKEY_FILE %s: %w", file, err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(raw))))
	clear(raw)
	if err != nil {
		return "", fmt.Errorf("NATS_NKEY_FILE %s: not an nkey seed", file) // never the content
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// watchKey calls rotated once the key file holds a key other than pub. A
// file that cannot be read for a moment (mid-replacement) is no change.
func watchKey(ctx context.Context, file, pub string, every time.Duration, rotated func()) {
	if every <= 0 {
		every = DefaultKeyCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if now, err := filePublicKey(file); err == nil && now != pub {
				rotated()
				return
			}
		}
	}
}
