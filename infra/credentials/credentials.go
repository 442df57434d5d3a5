// Package credentials derives each bus user's NATS nkey from one master
// secret (the stack's flock:busSecret). Derivation is deterministic, so the
// credentials are the same on every preview (no churn), yet each user's key
// is independent: knowing agent-1's seed tells nothing about agent-2's.
// The bus config holds only public keys; seeds reach their owner as files.
package credentials

import (
	"crypto/hmac"
	"crypto/sha256"
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
