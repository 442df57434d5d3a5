package gateway

import (
	"fmt"
	"net/http"
)

// egressRequest hands an agent's way out to the broker: CONNECT host:port
// (HTTPS_PROXY) or an absolute-form request (HTTP_PROXY). Without egress
// rules there is no way out, and the refusal says so.
func (g *Handler) egressRequest(w http.ResponseWriter, r *http.Request, agent string) {
	if g.egress != nil {
		if r.Method == http.MethodConnect {
			g.egress.Connect(w, r, agent)
		} else {
			g.egress.Forward(w, r, agent)
		}
		return
	}
	host := r.Host
	g.log.Warn("egress refused", "agent", agent, "method", r.Method, "host", host, "status", http.StatusForbidden)
	writeError(w, http.StatusForbidden, apiError{Type: "connect_refused", Host: host,
		Message: fmt.Sprintf("agent %s may not reach %q: the flock has no egress rules (flock:gateway.egress); the gateway serves /<upstream>/<path> only", agent, host)})
}
