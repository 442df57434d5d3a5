package operator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Credential is the operator's nkey: a seed file (Docker hosts: make
// operator-key writes one), or the seed itself (the aws operator task gets it
// from Secrets Manager in its environment). At most one of the two.
type Credential struct {
	File string
	Seed string
}

func (c Credential) option() (nats.Option, error) {
	switch {
	case c.File != "" && c.Seed != "":
		return nil, errors.New("nkey: give either a seed file or a seed, not both")
	case c.File != "":
		nk, err := nats.NkeyOptionFromSeed(c.File)
		if err != nil {
			return nil, fmt.Errorf("nkey %s: %w", c.File, err)
		}
		return nk, nil
	case c.Seed != "":
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(c.Seed)))
		if err != nil {
			return nil, fmt.Errorf("nkey seed: %w", err) // never the seed itself
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("nkey seed: %w", err)
		}
		return nats.Nkey(pub, kp.Sign), nil
	}
	return nil, nil
}
