package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

type status struct {
	Time  time.Time `json:"time"`
	State string    `json:"state"`
	PID   int       `json:"pid"`
}

// writeStatus records that the agent just confirmed its bus connection.
func writeStatus(file, state string) error {
	if file == "" || file == "-" {
		return nil
	}
	b, _ := json.Marshal(status{Time: time.Now().UTC(), State: state, PID: os.Getpid()})
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return writeAtomic(file, b)
}

// CheckHealth is the container healthcheck: healthy iff the agent confirmed
// its bus connection within maxAge and is not stopping.
func CheckHealth(file string, maxAge time.Duration) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("no status from the agent: %w", err)
	}
	var s status
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("unreadable status file %s: %w", file, err)
	}
	age := time.Since(s.Time)
	switch {
	case age > maxAge:
		return fmt.Errorf("agent last confirmed its bus connection %s ago (limit %s)", age.Round(time.Second), maxAge)
	case s.State == protocol.StateStopped:
		return fmt.Errorf("agent is stopped")
	}
	return nil
}
