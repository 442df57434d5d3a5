// Package credentials derives each bus user's NATS nkey from one master
// secret (the stack's flock:busSecret). Derivation is deterministic, so the
// credentials are the same on every preview (no churn), yet each user's key
// is independent: knowing agent-1's seed tells nothing about agent-2's.
// The bus config holds only public keys; seeds reach their owner as files.
package credentials

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nkeys"
)

// MinSecretLen is the shortest master secret accepted (bytes).
const MinSecretLen = 32

// Key is one user's nkey pair.
type Key struct {
	Seed   string // "SU...": secret, the user's credential
	Public string // "U...": goes into the bus config
}

// Derive returns the nkey of user under master: protocol.AgentUser(id) for an agent,
// "operator" (protocol.OperatorUser) for the operator.
func Derive(master []byte, user string) (Key, error) {
	if len(master) < MinSecretLen {
		return Key{}, errors.New("master secret too short")
	}
	mac := hmac.New(sha256.New, master)
	mac.Write([]byte("ai-flock/nats-user/v1/" + user))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, mac.Sum(nil))
	if err != nil {
		return Key{}, fmt.Errorf("derive %s: %w", user, err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return Key{}, fmt.Errorf("derive %s: %w", user, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return Key{}, fmt.Errorf("derive %s: %w", user, err)
	}
	return Key{Seed: string(seed), Public: pub}, nil
}

// GatewayToken returns agent agentID's gateway token under master: the
// credential the agent presents to the model gateway on aws, where agents
// share one network and the gateway tells them apart by it (the gateway
// keeps only its SHA-256). It is the hex HMAC-SHA256 of a label of its own,
// so it is independent of every nkey derived from the same master, and
// knowing one agent's token tells nothing about another's.
func GatewayToken(master []byte, agentID string) (string, error) {
	if len(master) < MinSecretLen {
		return "", errors.New("master secret too short")
	}
	if agentID == "" {
		return "", errors.New("gateway token: no agent ID")
	}
	mac := hmac.New(sha256.New, master)
	mac.Write([]byte("ai-flock/gateway-token/v1/" + agentID))
	return hex.EncodeToString(mac.Sum(nil)), nil
}

// EgressCASeed returns the seed of flock's egress CA under master: the CA
// whose leaves the gateway shows agents for brokered hosts
// (protocol/egressca). Derived as the bus keys are, with a label of its
// own, so a `pulumi up` makes the same CA and no agent's trust changes;
// only the gateway holds it.
func EgressCASeed(master []byte, flock string) ([]byte, error) {
	if len(master) < MinSecretLen {
		return nil, errors.New("master secret too short")
	}
	mac := hmac.New(sha256.New, master)
	mac.Write([]byte("ai-flock/egress-ca/v1/" + flock))
	return mac.Sum(nil), nil
}
