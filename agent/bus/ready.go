package bus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultBootstrapGrace is how long a cluster node alone (no JetStream meta
// leader in sight) waits before it calls itself healthy anyway.
const DefaultBootstrapGrace = 30 * time.Second

// ReadyMaxAge is how old the ready file may be: the bus rewrites it every
// readyEvery while it is healthy.
const (
	ReadyMaxAge = 10 * time.Second
	readyEvery  = 2 * time.Second
)

// Healthy is what an orchestrator's health check asks. A single node is
// healthy once started. A cluster node is healthy once Ready (topology
// applied, current with the cluster), and also when it has been up for the
// bootstrap grace without seeing a JetStream meta leader: the first node of
// a cluster started one service at a time (Fargate) must look healthy for
// the next to be started, and it cannot be current alone. A node that sees a
// leader but is not current (a replacement catching up) is not healthy, so
// a rolling deployment waits for it before taking the next node.
func (s *Server) Healthy() error {
	err := s.Ready()
	if err == nil || !s.clustered {
		return err
	}
	if time.Since(s.started) < s.cfg.BootstrapGrace {
		return err
	}
	jsz, jerr := s.ns.Jsz(&server.JSzOptions{})
	if jerr == nil && (jsz.Meta == nil || jsz.Meta.Leader == "") {
		return nil // bootstrapping: no leader anywhere this node can see
	}
	return err
}

// WriteReady keeps path fresh while the bus is Healthy (rewritten every 2 s)
// and removes it while it is not, until ctx ends. `flock-bus health` reads it.
func (s *Server) WriteReady(ctx context.Context, path string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		s.log.Error("ready file: no directory", "path", path, "err", err)
	}
	t := time.NewTicker(readyEvery)
	defer t.Stop()
	wasHealthy := true
	for {
		if err := s.Healthy(); err != nil {
			_ = os.Remove(path)
			if wasHealthy {
				s.log.Warn("bus not ready", "reason", err.Error())
			}
			wasHealthy = false
		} else {
			if err := os.WriteFile(path, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
				s.log.Error("ready file not written", "path", path, "err", err)
			}
			if !wasHealthy {
				s.log.Info("bus ready")
			}
			wasHealthy = true
		}
		select {
		case <-ctx.Done():
			_ = os.Remove(path)
			return
		case <-t.C:
		}
	}
}

// CheckReady reports whether the ready file at path was written within maxAge.
func CheckReady(path string, maxAge time.Duration) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	if age := time.Since(st.ModTime()); age > maxAge {
		return fmt.Errorf("not ready: %s was last written %s ago", path, age.Round(time.Second))
	}
	return nil
}
