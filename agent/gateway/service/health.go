package service

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// HealthReport is /healthz's body.
type HealthReport struct {
	Status    string `json:"status"`
	Upstreams int    `json:"upstreams"`
	Agents    int    `json:"agents"`
	Bus       string `json:"bus"` // connected, disconnected, or off (no natsUrl)
}

// healthHandler serves /healthz. A bus that is down does not make the
// gateway unhealthy: model calls do not need it.
func healthHandler(cur *atomic.Pointer[Setup], pub *publisher) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s := cur.Load()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(HealthReport{Status: "ok", Upstreams: len(s.cfg.Upstreams),
			Agents: len(s.cfg.Agents), Bus: pub.status()})
	})
	return mux
}

// Probe asks the health endpoint at addr whether the gateway is ok.
func Probe(addr string) error {
	client := &http.Client{Timeout: healthTimeout}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h HealthReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&h); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || h.Status != "ok" {
		return fmt.Errorf("%s, status %q", resp.Status, h.Status)
	}
	return nil
}
