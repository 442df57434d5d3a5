package worker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/pace"
	"github.com/ai-flock/ai-flock/protocol"
)

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
func (a *Agent) lookup(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := a.js.Consumer(cctx, stream, name)
		cancel()
		if err == nil {
			return c, nil
		}
		a.log.Warn("consumer not available yet", "stream", stream, "consumer", name, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

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
func watchKey(ctx context.Context, file, pub string, period time.Duration, rotated func()) {
	if period <= 0 {
		period = DefaultKeyCheck
	}
	pace.Every(ctx, period, func() bool {
		if now, err := filePublicKey(file); err == nil && now != pub {
			rotated()
			return false
		}
		return true
	})
}
