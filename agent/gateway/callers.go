package gateway

import (
	"net/http"
	"net/netip"
)

// caller names the request's agent: by its token if the gateway is
// configured so, else by the connection's source address.
func (g *Handler) caller(r *http.Request) (string, bool) {
	if g.callerReq != nil {
		return g.callerReq(r)
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return "", false
	}
	return g.callerOf(ap.Addr().Unmap())
}

// refuseCaller answers a request the gateway cannot attribute to an agent.
// By token: 401 (407 to a CONNECT, which proxies answer so), never saying
// what was sent; by address: 403.
func (g *Handler) refuseCaller(w http.ResponseWriter, r *http.Request) {
	g.log.Warn("refused: unknown caller", "remote", r.RemoteAddr, "method", r.Method)
	switch {
	case g.callerReq == nil:
		writeError(w, http.StatusForbidden, apiError{Type: "unknown_caller",
			Message: "this address is not an agent of the flock: the gateway knows callers by their network only"})
	case r.Method == http.MethodConnect:
		w.Header().Set("Proxy-Authenticate", `Basic realm="flock-gateway"`)
		writeError(w, http.StatusProxyAuthRequired, apiError{Type: "unknown_caller",
			Message: "no known gateway token: give the agent's FLOCK_GATEWAY_TOKEN as the proxy password"})
	default:
		writeError(w, http.StatusUnauthorized, apiError{Type: "unknown_caller",
			Message: "no known gateway token: send the agent's FLOCK_GATEWAY_TOKEN as the API key"})
	}
}
