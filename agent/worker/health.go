package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// status is what the agent writes to its status file every StatusEvery,
// connected to the bus or not: the health check reads it.
type status struct {
	Time  time.Time `json:"time"`
	State string    `json:"state"`
	PID   int       `json:"pid"`
	// Bus says whether the bus answered the agent's last PING ("connected")
	// or not ("unreachable": connecting, or reconnecting after a loss).
	// It is reported, never a reason to be unhealthy: an orchestrator
	// replaces unhealthy tasks (ECS does), and replacing every agent
	// because the bus is away for a minute helps nobody.
	Bus string `json:"bus"`
	// BusConfirmed is when the bus last answered a PING (zero: never).
	BusConfirmed time.Time `json:"bus_confirmed,omitzero"`
}

// Values of status.Bus.
const (
	busConnected   = "connected"
	busUnreachable = "unreachable"
)

// writeStatus records that the agent's runtime is alive, and how its bus is.
func writeStatus(file string, s status) error {
	if file == "" || file == "-" {
		return nil
	}
	s.Time, s.PID = time.Now().UTC(), os.Getpid()
	b, _ := json.Marshal(s)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return writeAtomic(file, b)
}

// Health is what the health check learnt from the status file.
type Health struct {
	State        string
	Bus          string
	BusConfirmed time.Time
}

// CheckHealth is the container healthcheck: healthy iff the agent's runtime
// wrote its status within maxAge (its loops run) and it is not stopped.
// Whether the bus is reachable is in the returned Health (and in the
// agent's heartbeats and events), not in the verdict.
func CheckHealth(file string, maxAge time.Duration) (Health, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Health{}, fmt.Errorf("no status from the agent: %w", err)
	}
	var s status
	if err := json.Unmarshal(b, &s); err != nil {
		return Health{}, fmt.Errorf("unreadable status file %s: %w", file, err)
	}
	h := Health{State: s.State, Bus: s.Bus, BusConfirmed: s.BusConfirmed}
	age := time.Since(s.Time)
	switch {
	case age > maxAge:
		return h, fmt.Errorf("agent runtime last wrote its status %s ago (limit %s): it is hung or gone", age.Round(time.Second), maxAge)
	case s.State == protocol.StateStopped:
		return h, fmt.Errorf("agent is stopped")
	}
	return h, nil
}
