package service

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/agent/gateway"
	"github.com/ai-flock/ai-flock/agent/gateway/broker"
	"github.com/ai-flock/ai-flock/protocol"
)

// configVersion is the GatewayConfig.V this gateway reads.
const configVersion = 1

// Setup is a validated configuration, keys read, ready to serve.
type Setup struct {
	cfg    protocol.GatewayConfig
	gw     gateway.Config // OnUsage, Logger and Egress still unset
	nkey   nats.Option    // nil without a bus
	egress *egressSetup   // nil: no egress rules
	// onEgress gets each egress connection's record (Serve sets it: the
	// bus's publisher); nil: none.
	onEgress func(broker.Connection)
}

// Load reads the configuration from the environment parts if
// FLOCK_GATEWAY_CONFIG_DATA_PARTS is set (aws), else from the file at
// FLOCK_GATEWAY_CONFIG, and checks all of it. The error joins every problem
// found (Problems lists them), each naming its field; none holds a key or a
// seed.
func Load(getenv func(string) string) (*Setup, error) {
	data, fromEnv, err := protocol.DecodeEnv(protocol.EnvGatewayConfigData, getenv)
	source := protocol.EnvGatewayConfigData
	if err != nil {
		return nil, err
	}
	if !fromEnv {
		source = cmp.Or(getenv(protocol.EnvGatewayConfig), protocol.GatewayConfigFile)
		if data, err = os.ReadFile(source); err != nil {
			return nil, fmt.Errorf("%s: %w", protocol.EnvGatewayConfig, err)
		}
	}
	var c protocol.GatewayConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a misspelt field is a mistake, not a default
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", source)
	}
	return check(c, getenv)
}

// check validates c and reads its keys.
func check(c protocol.GatewayConfig, getenv func(string) string) (*Setup, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	s := &Setup{cfg: c, gw: gateway.Config{
		Upstreams:     map[string]gateway.Upstream{},
		Budgets:       map[string]int64{},
		BudgetWindows: map[string]string{},
	}}
	if c.V != configVersion {
		bad("v", "must be %d (got %d)", configVersion, c.V)
	}

	upIndex := map[string]int{}
	for i, u := range c.Upstreams {
		field := fmt.Sprintf("upstreams[%d]", i)
		if err := gateway.CheckName(u.Name); err != nil {
			bad(field+".name", "%v: it is the first path element agents call", err)
		} else if j, dup := upIndex[u.Name]; dup {
			bad(field+".name", "%q is upstreams[%d]'s name too", u.Name, j)
		} else {
			upIndex[u.Name] = i
		}
		up := gateway.Upstream{API: u.API, Prices: u.Prices, URL: u.URL, KeyHeader: u.KeyHeader, KeyPrefix: u.KeyPrefix}
		errs = append(errs, gateway.CheckUpstream(field, up)...)
		key, err := readSecret(field, "keyFile", "keyEnv", u.KeyFile, u.KeyEnv, getenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w (upstream %q's key)", err, u.Name))
			continue
		}
		up.Key = key
		s.gw.Upstreams[u.Name] = up
	}

	switch c.Callers {
	case protocol.CallersByNetwork, protocol.CallersByToken:
	default:
		bad("callers", "must be %q (each agent on its own network) or %q (each agent with its token) (got %q)",
			protocol.CallersByNetwork, protocol.CallersByToken, c.Callers)
	}
	var (
		byNet   networkCallers
		byToken tokenCallers
		idIndex = map[string]int{}
		sums    = map[[32]byte]int{}
	)
	for i, a := range c.Agents {
		field := fmt.Sprintf("agents[%d]", i)
		if err := gateway.CheckName(a.ID); err != nil {
			bad(field+".id", "%v", err)
		} else if j, dup := idIndex[a.ID]; dup {
			bad(field+".id", "%q is agents[%d]'s ID too", a.ID, j)
		} else {
			idIndex[a.ID] = i
		}
		if a.BudgetTokens < 0 {
			bad(field+".budgetTokens", "must be >= 0 (0: no cap) (got %d)", a.BudgetTokens)
		} else if a.BudgetTokens > 0 {
			s.gw.Budgets[a.ID] = a.BudgetTokens
		}
		if !protocol.ValidWindow(a.BudgetWindow) {
			bad(field+".budgetWindow", "must be %q, %q or empty (no window) (got %q)", protocol.WindowDay, protocol.WindowMonth, a.BudgetWindow)
		} else if a.BudgetWindow != "" {
			s.gw.BudgetWindows[a.ID] = a.BudgetWindow
		}
		switch c.Callers {
		case protocol.CallersByNetwork:
			p, err := netip.ParsePrefix(a.Network)
			switch {
			case err != nil:
				bad(field+".network", "must be a CIDR such as 10.210.1.0/28: callers %q knows the agent by it (got %q)", c.Callers, a.Network)
			case p != p.Masked():
				bad(field+".network", "must be a network's address, %s (got %q)", p.Masked(), a.Network)
			default:
				for j, q := range byNet.nets {
					if q.Overlaps(p) {
						bad(field+".network", "%s overlaps agents[%d].network %s: an address must be one agent's", p, byNet.index[j], q)
					}
				}
				byNet.add(a.ID, i, p)
			}
		case protocol.CallersByToken:
			sum, err := hex.DecodeString(a.TokenSHA256)
			switch {
			case err != nil || len(sum) != 32 || strings.ToLower(a.TokenSHA256) != a.TokenSHA256:
				bad(field+".tokenSha256", "must be 64 lower-case hex digits, the SHA-256 of the agent's token (callers %q)", c.Callers)
			case [32]byte(sum) == sha256.Sum256(nil):
				bad(field+".tokenSha256", "is the SHA-256 of the empty string: the agent needs a token")
			default:
				k := [32]byte(sum)
				if j, dup := sums[k]; dup {
					bad(field+".tokenSha256", "is agents[%d]'s too: a token must be one agent's", j)
				}
				sums[k] = i
				byToken.add(a.ID, k)
			}
		}
	}
	switch c.Callers {
	case protocol.CallersByNetwork:
		s.gw.CallerOf = byNet.of
	case protocol.CallersByToken:
		s.gw.CallerOfRequest = byToken.of
	}

	if c.NATSURL != "" {
		for _, raw := range strings.Split(c.NATSURL, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") || u.User != nil {
				bad("natsUrl", "must be nats:// or tls:// URLs, comma-separated, without credentials (the nkey is the credential)")
				break
			}
		}
		seed, err := readSecret("", "nkeyFile", "nkeyEnv", c.NkeyFile, c.NkeyEnv, getenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w (the gateway's bus credential, needed with natsUrl)", err))
		} else if nk, err := nkeyOption(seed); err != nil {
			where := "nkeyFile"
			if c.NkeyFile == "" {
				where = "nkeyEnv"
			}
			bad(where, "%v", err)
		} else {
			s.nkey = nk
		}
	}
	if c.Egress != nil {
		ids := make([]string, 0, len(c.Agents))
		for _, a := range c.Agents {
			ids = append(ids, a.ID)
		}
		var eerrs []error
		s.egress, eerrs = checkEgress(c, ids, getenv)
		errs = append(errs, eerrs...)
	}
	if c.OTLPEndpoint != "" {
		if err := protocol.CheckOTLPEndpoint(c.OTLPEndpoint); err != nil {
			bad("otlpEndpoint", "%v", err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The library's own checks: nothing above should have let a problem by.
	if err := s.gw.Validate(); err != nil {
		return nil, errors.Join(err) // one problem, however many it names
	}
	return s, nil
}

// readSecret reads a key or a seed from the file or the variable the config
// names (exactly one), without one trailing newline. Errors name the field
// and the file or variable, never the value.
func readSecret(prefix, fileField, envField, file, env string, getenv func(string) string) (string, error) {
	field := func(f string) string {
		if prefix == "" {
			return f
		}
		return prefix + "." + f
	}
	var v string
	switch {
	case file != "" && env != "":
		return "", fmt.Errorf("%s: set only one of %s and %s", cmp.Or(prefix, fileField), fileField, envField)
	case file != "":
		b, err := readSmall(file)
		if err != nil {
			return "", fmt.Errorf("%s: %w", field(fileField), err) // the path, never the content
		}
		v = string(b)
		v = strings.TrimSuffix(strings.TrimSuffix(v, "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("%s: %s is empty", field(fileField), file)
		}
	case env != "":
		if v = getenv(env); v == "" {
			return "", fmt.Errorf("%s: $%s is unset or empty", field(envField), env)
		}
	default:
		return "", fmt.Errorf("%s: set %s or %s", cmp.Or(prefix, fileField), fileField, envField)
	}
	if strings.ContainsAny(v, "\r\n") {
		where := field(fileField)
		if file == "" {
			where = field(envField)
		}
		return "", fmt.Errorf("%s: must hold one line", where)
	}
	return v, nil
}

// maxSecret bounds a key or seed file: a path to something else (a device, a
// log) must not be read whole.
const maxSecret = 64 << 10

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSecret {
		return nil, fmt.Errorf("%s is over %d KiB: not a key", path, maxSecret>>10)
	}
	return b, nil
}

// nkeyOption is the bus credential from a user seed (as agent/operator
// builds it from a seed it was given).
func nkeyOption(seed string) (nats.Option, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(seed)))
	if err != nil {
		return nil, errors.New("not an nkey seed") // never the seed itself
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, errors.New("must be a user nkey seed (SU…)")
	}
	return nats.Nkey(pub, kp.Sign), nil
}
