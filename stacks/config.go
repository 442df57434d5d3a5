// Package stacks is the Pulumi program: it loads and validates the stack
// configuration into the flock model, then hands it to the component of the
// stack's target and exports the outputs operators use.
package stacks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/dockerflock"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Settings is everything a stack needs besides the flock model.
type Settings struct {
	Model     flock.Model
	BusSecret []byte // flock:busSecret, the master of every bus credential
	// GatewayKeys are the upstreams' keys (upstream name -> key), from the
	// secret config keys flock:gateway.upstreams names.
	GatewayKeys map[string]string
	// EgressSecrets are the egress rules' credentials (config key without
	// flock: -> value), from the secret config keys the rules name.
	EgressSecrets map[string]string
	Docker        dockerflock.Args // flock:docker and docker:host, validated (docker target only)
	AWS           awsflock.Args    // flock:aws, validated (aws target only)
}

// Load reads every flock: key and validates it into Settings: the model's
// keys by infra/flock, each target's own keys by its component. All problems
// are reported together, each naming its key and the rule it breaks; nothing
// is declared until the configuration is valid.
func Load(ctx *pulumi.Context) (Settings, error) {
	var (
		c          flock.Config
		dockerConf dockerflock.Config
		awsConf    awsflock.Config
		s          Settings
		errs       []error
	)
	str := func(key string, dst *string) {
		v, err := config.Try(ctx, key)
		if err == nil {
			*dst = v
		} else if !errors.Is(err, config.ErrMissingVar) {
			errs = append(errs, &flock.Error{Key: key, Rule: err.Error()})
		}
	}
	obj := func(key, want string, dst any) (ok bool) {
		raw, err := config.Try(ctx, key)
		if errors.Is(err, config.ErrMissingVar) {
			return true
		}
		if err == nil {
			dec := json.NewDecoder(strings.NewReader(raw))
			dec.DisallowUnknownFields() // a typo must not silently fall back to a default
			err = dec.Decode(dst)
		}
		if err != nil {
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("must be %s: %v", want, jsonReason(err))})
		}
		return err == nil
	}
	str("flock:target", &c.Target)
	str("flock:name", &c.Name)
	str("flock:runtime", &c.Runtime)
	obj("flock:agentCount", "a whole number", &c.AgentCount)
	obj("flock:agents", "a list of {id, slot, limits, program, gateway, image, labels}", &c.Agents)
	obj("flock:program", `a list: the agent program and its arguments, such as ["/shared/common/bin/my-agent", "--verbose"]`, &c.Program)
	obj("flock:overrides", "a map of agent ID to limits", &c.Overrides)
	obj("flock:limits", "an object {cpus, memoryMiB, pids, tmpfsMiB, taskTimeout, concurrency, diskMiB}", &c.Limits)
	obj("flock:uidBase", "a whole number", &c.UIDBase)
	obj("flock:shared", "an object {root, stateRoot}", &c.Shared)
	obj("flock:bus", "an object (see the README's configuration reference)", &c.Bus)
	obj("flock:board", "an object {claimLimit, addQuota, keepFinished}", &c.Board)
	obj("flock:audit", "an object {retention, maxMiB}", &c.Audit)
	obj("flock:otlp", "an object {endpoint}", &c.OTLP)
	obj("flock:services", "an object {limits}", &c.Services)
	obj("flock:network", "an object {pool, prefixLength}", &c.Network)
	obj("flock:image", "an object {base} or {dockerfile, context}", &c.Image)
	obj("flock:gateway", "an object {upstreams, budgetTokens, allowHosts, limits}", &c.Gateway)
	dockerOK := obj(dockerflock.Key, dockerflock.ConfigShape, &dockerConf)
	awsOK := obj(awsflock.Key, awsflock.ConfigShape, &awsConf)
	var dockerHost string
	str(dockerflock.HostKey, &dockerHost)

	m, err := c.Validate()
	if err != nil {
		errs = append(errs, err)
	}
	var targetErr error
	switch {
	case c.Target == string(flock.TargetDocker) && dockerOK:
		s.Docker, targetErr = dockerConf.Validate(m, dockerHost)
	case c.Target == string(flock.TargetAWS) && awsOK:
		s.AWS, targetErr = awsConf.Validate(ctx.Stack(), m, err == nil)
	}
	errs = append(errs, protocol.Problems(targetErr)...)
	secret, err := busSecret(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	keys, keyErrs := gatewayKeys(ctx, m.Gateway)
	errs = append(errs, keyErrs...)
	egressSecrets, egressErrs := egressSecrets(ctx, m.Gateway)
	errs = append(errs, egressErrs...)
	if len(errs) > 0 {
		return Settings{}, fmt.Errorf("invalid stack configuration:\n%w", errors.Join(errs...))
	}
	s.Model, s.BusSecret, s.GatewayKeys, s.EgressSecrets = m, secret, keys, egressSecrets
	return s, nil
}

const busSecretKey = "flock:busSecret"

func busSecret(ctx *pulumi.Context) ([]byte, error) {
	v, err := config.Try(ctx, busSecretKey)
	switch {
	case errors.Is(err, config.ErrMissingVar):
		return nil, &flock.Error{Key: busSecretKey, Rule: "is required: set it once with `pulumi config set --secret flock:busSecret \"$(openssl rand -hex 32)\"` (make deploy does this for you)"}
	case err != nil:
		return nil, &flock.Error{Key: busSecretKey, Rule: err.Error()}
	case !ctx.IsConfigSecret(busSecretKey):
		return nil, &flock.Error{Key: busSecretKey, Rule: "must be stored as a secret (pulumi config set --secret), never in plain text"}
	case len(v) < credentials.MinSecretLen:
		return nil, &flock.Error{Key: busSecretKey, Rule: fmt.Sprintf("must be at least %d characters", credentials.MinSecretLen)}
	}
	return []byte(v), nil
}

// gatewayKeys reads each upstream's key from its secret config key. A key
// in plain text is refused: it would sit readable in Pulumi.<stack>.yaml.
func gatewayKeys(ctx *pulumi.Context, g flock.ModelGateway) (map[string]string, []error) {
	keys := map[string]string{}
	var errs []error
	for _, up := range g.Upstreams {
		key := "flock:" + up.KeySecret
		v, err := config.Try(ctx, key)
		switch {
		case errors.Is(err, config.ErrMissingVar):
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("is required: the key of upstream %q; set it with `pulumi config set --secret %s <key>`", up.Name, key)})
		case err != nil:
			errs = append(errs, &flock.Error{Key: key, Rule: err.Error()})
		case !ctx.IsConfigSecret(key):
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("must be stored as a secret (pulumi config set --secret %s …), never in plain text: it is upstream %q's key", key, up.Name)})
		case strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\r\n"):
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("must be upstream %q's key: not empty, one line", up.Name)})
		default:
			keys[up.Name] = v
		}
	}
	return keys, errs
}

// egressSecrets reads each egress credential from the secret config key its
// rule names; a value in plain text is refused naming the key.
func egressSecrets(ctx *pulumi.Context, g flock.ModelGateway) (map[string]string, []error) {
	out := map[string]string{}
	var errs []error
	for _, name := range g.EgressSecrets() {
		key := "flock:" + name
		v, err := config.Try(ctx, key)
		switch {
		case errors.Is(err, config.ErrMissingVar):
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("is required: an egress rule's credential (%s) names it; set it with `pulumi config set --secret %s <value>`", flock.EgressKey, key)})
		case err != nil:
			errs = append(errs, &flock.Error{Key: key, Rule: err.Error()})
		case !ctx.IsConfigSecret(key):
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf("must be stored as a secret (pulumi config set --secret %s …), never in plain text: it is an egress rule's credential", key)})
		case strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\r\n"):
			errs = append(errs, &flock.Error{Key: key, Rule: "must be an egress credential: not empty, one line"})
		default:
			out[name] = v
		}
	}
	return out, errs
}

func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q cannot be a JSON %s", te.Field, te.Value)
		}
		return fmt.Sprintf("got a JSON %s", te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "not valid JSON/YAML structure"
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field") {
		return strings.TrimPrefix(msg, "json: ")
	}
	return err.Error()
}

// ConfigKeys are every key the program reads, both targets', in the order of
// the configuration reference (docs/configuration.md).
func ConfigKeys() []flock.ConfigKey {
	keys := append(flock.ModelKeys(),
		flock.ConfigKey{Key: busSecretKey, Type: "secret string", Default: "(required)", Rule: fmt.Sprintf("a secret of at least %d characters, never plain text", credentials.MinSecretLen), Targets: flock.BothTargets, Description: "master of every bus credential; make deploy sets one"},
		flock.ConfigKey{Key: "flock:<name>ApiKey", Type: "secret string", Default: "", Rule: "a secret, one line, not empty; required for every upstream", Targets: flock.BothTargets, Description: "upstream <name>'s key (or the key its keySecret names)"},
		flock.ConfigKey{Key: "flock:<credential.secret>", Type: "secret string", Default: "", Rule: "a secret, one line, not empty; required for every egress rule with a credential", Targets: flock.DockerOnly, Description: "the value the gateway puts in an egress rule's requests (a token, a password)"},
	)
	keys = append(keys, dockerflock.ConfigKeys()...)
	return append(keys, awsflock.ConfigKeys()...)
}
