package board

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// ConnectAgent connects to the bus as the agent its environment names, the
// way `flock-agent mcp` does, so that an agent program (or a task's process)
// asks the board as its agent: the ID in FLOCK_AGENT_ID (else AGENT_ID), the
// bus in FLOCK_NATS_URL (else NATS_URL, else the local bus) and the key in
// the seed file FLOCK_NKEY_FILE (else NATS_NKEY_FILE, else the container's).
// The runtime sets the FLOCK_* ones for its program and its tasks. name
// names the connection on the bus (name/<id>); opts are added to the
// connection's options (reconnecting for ever, replies in the agent's own
// inbox space).
func ConnectAgent(getenv func(string) string, name string, opts ...nats.Option) (*Client, *nats.Conn, error) {
	pick := func(def string, names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return def
	}
	id := pick("", "FLOCK_AGENT_ID", protocol.EnvAgentID)
	url := pick("nats://127.0.0.1:"+strconv.Itoa(protocol.ClientPort), protocol.EnvCLINATSURL, protocol.EnvNATSURL)
	keyFile := pick(protocol.ContainerCredsFile, protocol.EnvCLINkeyFile, protocol.EnvNkeyFile)
	switch {
	case id == "":
		return nil, nil, errors.New("FLOCK_AGENT_ID: required (the agent sets it for its program and its tasks)")
	case !protocol.ValidAgentID(id):
		return nil, nil, fmt.Errorf("FLOCK_AGENT_ID: %w", &protocol.AgentIDError{ID: id})
	}
	nk, err := nats.NkeyOptionFromSeed(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("FLOCK_NKEY_FILE %s: %w", keyFile, err)
	}
	all := append([]nats.Option{nk,
		nats.Name(name + "/" + id),
		nats.CustomInboxPrefix(protocol.InboxPrefix(id)),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectBufSize(1 << 20),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, nil, fmt.Errorf("bus %s: %w", url, err)
	}
	return NewAgentClient(nc, id), nc, nil
}

// As is whom the client asks as: an agent's ID, or protocol.OperatorUser.
func (c *Client) As() string { return c.as }
