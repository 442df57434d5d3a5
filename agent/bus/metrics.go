package bus

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/protocol"
)

// metricsWait bounds one relayed scrape (the services' own JetStream
// questions are bounded shorter).
const metricsWait = 8 * time.Second

// ServeMetrics serves GET /metrics on addr until ctx ends: each scrape is
// relayed to the flock's services (protocol.SubjectMetrics), which keep
// the exporter; the bus adds nothing and keeps nothing. The stack
// publishes addr on the host's loopback only. It returns the address it
// listens on.
func (s *Server) ServeMetrics(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bus: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { relayScrape(s.nc, w, r) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 2 * metricsWait}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics relay stopped", "err", err)
		}
	}()
	s.log.Info("relaying metrics", "addr", ln.Addr().String())
	return ln.Addr(), nil
}

// relayScrape asks the services for the metrics and writes them as they
// came (gzip) to a scraper that accepts it, or decompressed.
func relayScrape(nc *nats.Conn, w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), metricsWait)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, protocol.SubjectMetrics, nil)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		http.Error(w, "the flock's services are not running: no metrics", http.StatusServiceUnavailable)
		return
	case err != nil:
		http.Error(w, "the flock's services did not answer: "+err.Error(), http.StatusGatewayTimeout)
		return
	case m.Header.Get(protocol.MetricsErrorHeader) != "":
		http.Error(w, "the flock's services could not gather the metrics: "+string(m.Data), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if strings.Contains(r.Header.Get("Accept-Encoding"), protocol.MetricsEncoding) {
		w.Header().Set("Content-Encoding", protocol.MetricsEncoding)
		_, _ = w.Write(m.Data)
		return
	}
	z, err := gzip.NewReader(bytes.NewReader(m.Data))
	if err != nil {
		http.Error(w, "unreadable answer from the flock's services: "+err.Error(), http.StatusBadGateway)
		return
	}
	_, _ = io.Copy(w, z)
}
