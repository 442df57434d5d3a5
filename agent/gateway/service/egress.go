package service

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/agent/gateway/netguard"
	"github.com/ai-flock/ai-flock/agent/ledger"
	"github.com/ai-flock/ai-flock/protocol"
	rules "github.com/ai-flock/ai-flock/protocol/egress"
	"github.com/ai-flock/ai-flock/protocol/egressca"
)

// egressSetup is the checked egress part of the config, credentials read;
// the broker is made from it once the logger is known (newBroker).
type egressSetup struct {
	rules *rules.Set
	ca    *egressca.CA // nil: the rules are all tunnels, no seed needed
	own   []netip.Prefix
	creds map[string]string // by where the credential is read: "file:<path>", "env:<name>"
}

func credentialSource(c *rules.Credential) string {
	if c.File != "" {
		return "file:" + c.File
	}
	return "env:" + c.Env
}

// checkEgress validates the egress part of c (the same rules Check as the
// stacks did, as the gateway's: credentials name a file or a variable) and
// reads its credentials and CA seed. Errors name the field, never a value.
func checkEgress(c protocol.GatewayConfig, agents []string, getenv func(string) string) (*egressSetup, []error) {
	e := c.Egress
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("egress.%s: "+format, append([]any{field}, args...)...))
	}
	out := &egressSetup{creds: map[string]string{}}
	for i, s := range e.Pool {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			bad(fmt.Sprintf("pool[%d]", i), "must be a CIDR (got %q)", s)
			continue
		}
		out.own = append(out.own, p.Masked())
	}
	checked, rerrs := rules.Check(e.Rules, rules.Context{Key: "egress.rules", Agents: agents, Pool: out.own, Gateway: true})
	errs = append(errs, rerrs...)
	brokered := false
	for _, r := range e.Rules {
		brokered = brokered || !r.Tunnel
	}
	for i := range checked {
		r := &checked[i]
		if r.Credential == nil {
			continue
		}
		v, err := readSecret(fmt.Sprintf("egress.rules[%d].credential", i), "file", "env", r.Credential.File, r.Credential.Env, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.creds[credentialSource(r.Credential)] = v
	}
	if brokered || e.CASeedFile != "" || e.CASeedEnv != "" {
		seed, err := readSecret("egress", "caSeedFile", "caSeedEnv", e.CASeedFile, e.CASeedEnv, getenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w (the egress CA's seed, needed by brokered rules)", err))
		} else if b, err := hex.DecodeString(seed); err != nil || len(b) != egressca.SeedSize {
			bad("caSeed", "must be %d bytes in hex", egressca.SeedSize)
		} else if out.ca, err = egressca.New(b, c.Flock); err != nil {
			bad("caSeed", "%v", err)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	out.rules = rules.NewSet(checked)
	return out, nil
}

// newBroker is the egress broker of e, logging to log, giving each
// connection's record to onConnection (nil: none), keeping the rules' byte
// budgets in led (nil: in memory).
func (e *egressSetup) newBroker(log *slog.Logger, onConnection func(broker.Connection), led ledger.Ledger) (*broker.Broker, error) {
	return broker.New(broker.Config{
		OnConnection: onConnection,
		Ledger:       led,
		Rules:        e.rules,
		CA:           e.ca,
		// The flock's pool and this host's own addresses are never an
		// upstream, besides netguard's private ranges.
		Guard:      netguard.New(nil, append(append([]netip.Prefix(nil), e.own...), netguard.OwnAddresses()...)...),
		Credential: func(r *rules.Rule) string { return e.creds[credentialSource(r.Credential)] },
		Logger:     log,
	})
}
