package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

func (g *Handler) rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(callKey{}).(*call)
	path, err := url.PathUnescape(c.rest)
	if err != nil {
		path = c.rest
	}
	pr.Out.URL.Path, pr.Out.URL.RawPath = path, c.rest
	pr.SetURL(c.up.url)
	h := pr.Out.Header
	for _, k := range g.strip {
		h.Del(k)
	}
	// Without Accept-Encoding the transport asks for gzip itself and hands
	// back the body decoded, which the meter needs to read.
	h.Del("Accept-Encoding")
	h.Set(c.up.header, c.up.value)
	if sp, ok := spanOf(pr.In); ok {
		h.Set(protocol.HeaderTraceparent, sp.String()) // the upstream's parent: the gateway's span
	}
}

func (g *Handler) modifyResponse(resp *http.Response) error {
	c := resp.Request.Context().Value(callKey{}).(*call)
	c.status = resp.StatusCode
	resp.Header.Del("Set-Cookie")
	c.meter = newMeter(resp.Header, resp.Body)
	c.meter.onEnd = func() { g.settle(c, false) }
	resp.Body = c.meter
	return nil
}

// statusClientGone is logged when the agent hung up before the upstream
// answered (nginx's 499); nobody is left to read an answer.
const statusClientGone = 499

func (g *Handler) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	c := r.Context().Value(callKey{}).(*call)
	if r.Context().Err() != nil {
		c.status = statusClientGone
		return
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL and its query
	}
	g.log.Warn("upstream did not answer", "agent", c.agent, "upstream", c.up.name, "error", err.Error())
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.status = http.StatusGatewayTimeout
		writeError(w, http.StatusGatewayTimeout, apiError{Type: "upstream_timeout", retry: true,
			Message: fmt.Sprintf("upstream %s did not answer in time", c.up.name)})
		return
	}
	c.status = http.StatusBadGateway
	writeError(w, http.StatusBadGateway, apiError{Type: "upstream_unreachable",
		Message: fmt.Sprintf("upstream %s gave no answer the gateway could read", c.up.name)})
}

// splitUpstream cuts an escaped path /<name>/<rest> into name and /<rest>.
func splitUpstream(p string) (name, rest string) {
	p = strings.TrimPrefix(p, "/")
	name, rest, _ = strings.Cut(p, "/")
	return name, "/" + rest
}

func hasDotDot(escaped string) bool {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return true
	}
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}
