package bustest

// The test bus's users: their keys, derived from the master secret, and
// connections as them.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
)

// busUser is the name a test user's key is derived under: the operator's,
// the gateway's and the services' own names, an agent's protocol.AgentUser.
func busUser(user string) string {
	if ownUser(user) {
		return user
	}
	return protocol.AgentUser(user)
}

// ownUser reports whether user is one of the flock's own (not an agent).
func ownUser(user string) bool {
	return user == protocol.OperatorUser || user == protocol.GatewayUser || user == protocol.ServicesUser
}

// Key derives user's (an agent ID, protocol.OperatorUser or
// protocol.GatewayUser) nkey from Master.
func Key(tb testing.TB, user string) credentials.Key {
	tb.Helper()
	k, err := credentials.Derive(Master, busUser(user))
	if err != nil {
		tb.Fatalf("derive %s: %v", user, err)
	}
	return k
}

// WriteSeed writes user's seed to a 0600 file under Dir and returns its path.
func (f *Bus) WriteSeed(user string) (string, error) {
	master := f.agentMaster
	if ownUser(user) {
		master = f.master
	}
	k, err := credentials.Derive(master, busUser(user))
	if err != nil {
		return "", err
	}
	p := filepath.Join(f.Dir, "seeds", user+".nk")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	return p, writeFile(p, []byte(k.Seed+"\n"))
}

// SeedFile is WriteSeed for a test.
func (f *Bus) SeedFile(tb testing.TB, user string) string {
	tb.Helper()
	p, err := f.WriteSeed(user)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Connect connects as user (an agent ID or protocol.OperatorUser) with the
// reply-inbox prefix the real clients use; closed when the test ends.
func (f *Bus) Connect(tb testing.TB, user string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := f.Dial(tb, user, opts...)
	if err != nil {
		tb.Fatalf("connect as %s: %v", user, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Dial is Connect that returns the error (for tests that expect one).
func (f *Bus) Dial(tb testing.TB, user string, opts ...nats.Option) (*nats.Conn, error) {
	tb.Helper()
	return f.DialUser(user, opts...)
}

// DialUser connects as user.
func (f *Bus) DialUser(user string, opts ...nats.Option) (*nats.Conn, error) {
	seed, err := f.WriteSeed(user)
	if err != nil {
		return nil, err
	}
	nk, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		return nil, err
	}
	token := user
	if user == protocol.OperatorUser {
		token = protocol.OperatorInboxToken
	}
	all := append([]nats.Option{nk, nats.Name("test " + user), nats.CustomInboxPrefix(protocol.InboxPrefix(token))}, opts...)
	return nats.Connect(f.URL, all...)
}
