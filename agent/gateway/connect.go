package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// allowRule is one AllowConnect entry: an exact host and port, or every name
// under a domain ("*.example.com:443": api.example.com, a.b.example.com, not
// example.com itself).
type allowRule struct {
	host     string // lower case, no trailing dot; the domain for a wildcard
	port     string
	wildcard bool
}

func parseAllowRule(hp string) allowRule {
	host, port, _ := net.SplitHostPort(hp) // Validate checked it
	r := allowRule{host: normalHost(host), port: port}
	if after, ok := strings.CutPrefix(r.host, "*."); ok {
		r.host, r.wildcard = after, true
	}
	return r
}

func (r allowRule) allows(host, port string) bool {
	if port != r.port {
		return false
	}
	if r.wildcard {
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// allowed says whether agent may open a tunnel to target ("host:port").
func (g *Handler) allowed(agent, target string) bool {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return false
	}
	host = normalHost(host)
	for _, r := range g.allow[agent] {
		if r.allows(host, port) {
			return true
		}
	}
	return false
}

// connect serves CONNECT host:port (an agent's HTTPS_PROXY): a tunnel to an
// allow-listed target, bytes copied both ways. What goes through is TLS the
// gateway cannot read, so it is neither metered nor given a key: it is for
// hosts an agent may reach with what it already holds.
func (g *Handler) connect(w http.ResponseWriter, r *http.Request, agent string, start time.Time) {
	target := r.Host
	logAttrs := []any{"agent", agent, "method", r.Method, "host", target}
	if !g.allowed(agent, target) {
		g.log.Warn("tunnel refused", append(logAttrs, "status", http.StatusForbidden)...)
		writeError(w, http.StatusForbidden, apiError{Type: "connect_refused", Host: target,
			Message: fmt.Sprintf("agent %s may not CONNECT to %q: not in its allow-list", agent, target)})
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok { // HTTP/2 has no hijacking; agents' proxies speak HTTP/1.1
		writeError(w, http.StatusHTTPVersionNotSupported, apiError{Type: "connect_unsupported",
			Message: "CONNECT needs HTTP/1.1"})
		return
	}
	up, err := g.dialer.DialContext(r.Context(), "tcp", target)
	if err != nil {
		g.log.Warn("tunnel failed", append(logAttrs, "status", http.StatusBadGateway, "error", err.Error())...)
		writeError(w, http.StatusBadGateway, apiError{Type: "upstream_unreachable", Host: target,
			Message: fmt.Sprintf("could not reach %q", target)})
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		g.log.Warn("tunnel failed", append(logAttrs, "error", err.Error())...)
		return
	}
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts were for the request, not the tunnel
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		conn.Close()
		up.Close()
		return
	}
	var sent, received int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // agent → target; brw holds what the agent sent after the CONNECT line
		defer wg.Done()
		sent, _ = io.Copy(up, brw)
		closeWrite(up)
	}()
	go func() { // target → agent
		defer wg.Done()
		received, _ = io.Copy(conn, up)
		closeWrite(conn)
	}()
	wg.Wait()
	conn.Close()
	up.Close()
	g.log.Info("tunnel", append(logAttrs, "status", http.StatusOK, "bytes_sent", sent, "bytes_received", received,
		"duration_ms", float64(time.Since(start).Microseconds())/1000)...)
}

// closeWrite ends one direction of a tunnel, so the other side sees EOF while
// the other direction carries on.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}
