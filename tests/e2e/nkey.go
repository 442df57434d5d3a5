package e2e

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// nkeyOption authenticates with an nkey seed held in memory.
func nkeyOption(seed string) (nats.Option, error) {
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Nkey(pub, func(nonce []byte) ([]byte, error) { return kp.Sign(nonce) }), nil
}
