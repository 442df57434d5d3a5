package suite

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// WaitReady waits until agents agents have each sent a heartbeat in state
// ready, connecting as an operator with connect (retried until the bus
// answers), for up to timeout in all.
func WaitReady(connect func() (*nats.Conn, error), agents int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var nc *nats.Conn
	var err error
	for time.Now().Before(deadline) {
		if nc, err = connect(); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("operator cannot reach the bus: %w", err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(protocol.SubjectHeartbeats)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for len(seen) < agents {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return fmt.Errorf("heartbeats from %d of %d agents after %s: %w", len(seen), agents, timeout, err)
		}
		var hb protocol.Heartbeat
		if json.Unmarshal(msg.Data, &hb) == nil && hb.State == protocol.StateReady {
			seen[hb.Agent] = true
		}
	}
	return nil
}
