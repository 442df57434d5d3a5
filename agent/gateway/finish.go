package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

// settle charges the call what it cost, once: as soon as the meter has
// seen its answer end (before the agent has the last of it, so that its
// next call finds this one settled), or else when the call ends.
func (g *Handler) settle(c *call, aborted bool) {
	if c.settled {
		return
	}
	c.settled = true
	if aborted {
		c.problem = "response cut short"
	}
	if c.meter != nil {
		got, ok, p := c.meter.result()
		if p != "" {
			c.problem = p
		}
		if c.reserved {
			// A complete, readable usage is the cost. An answer the upstream
			// bills but whose usage the gateway could not read all of (cut
			// short, unreadable, absent) costs the call's bound, never less
			// than what was read; an error answer without usage, nothing
			// (the upstreams bill no refused call).
			cost := got.Total + c.tools
			switch {
			case c.flat:
				cost, c.problem = c.bound, ""
				c.extra = append(c.extra, "charged_price", c.bound)
			case ok && c.problem == "":
			case !ok && c.status >= 400:
				cost = 0
			default:
				cost = max(c.bound, got.Total+c.tools)
				c.extra = append(c.extra, "charged_bound", c.bound)
			}
			got.Agent, got.Upstream, got.Status = c.agent, c.up.name, c.status
			if !ok || cost != got.Total {
				got.Total = cost
			}
			got.SpentTokens = g.ledger.Settle(c.res, cost)
			c.reserved = false
			c.charged = &got
		}
		// A free endpoint (token counting) has nothing to charge or report.
		if cl := c.meter.clamped(); cl != "" {
			// Charged all the same, at the bound: a broken upstream's
			// numbers neither overflow the ledger nor go uncharged.
			c.extra = append(c.extra, "clamped", cl)
		}
	}
	if c.reserved { // no answer at all (the upstream unreachable, the agent gone first)
		g.ledger.Settle(c.res, 0)
		c.reserved = false
	}
}

// finish charges what the call cost (unless its end already did), reports
// it and writes the access log.
func (g *Handler) finish(c *call, r *http.Request, start time.Time, aborted bool) {
	early := c.settled
	g.settle(c, aborted)
	problem, extra := c.problem, c.extra
	if aborted && early && problem == "" {
		// Charged its whole usage at its end; the agent did not take all of it.
		problem = "response cut short"
	}
	var u *Usage
	if c.charged != nil {
		got := *c.charged
		got.Trace = traceOf(r)
		got.BudgetTokens = g.budgets[c.agent].Tokens
		got.Duration = time.Since(start)
		u = &got
		if g.onUsage != nil {
			g.onUsage(got)
		}
	}
	if len(c.notes) > 0 {
		extra = append(extra, "request_changed", strings.Join(c.notes, "; "))
	}
	g.accessLog(c.agent, c.up.name, r, c.status, start, u, problem, extra...)
}

// accessLog writes one line per request: who, where, how it went and what it
// cost. Never a body, a query string or a header's value.
func (g *Handler) accessLog(agent, upstream string, r *http.Request, status int, start time.Time, u *Usage, problem string, extra ...any) {
	attrs := []any{"agent", agent, "upstream", upstream, "method", r.Method, "path", r.URL.Path,
		"status", status, "duration_ms", float64(time.Since(start).Microseconds()) / 1000}
	if tr := traceOf(r); tr != "" {
		attrs = append(attrs, "trace_id", tr)
		if tied(r) {
			attrs = append(attrs, "trace_from", "the agent's one running task")
		}
	}
	g.span(agent, upstream, r, status, start, problem)
	if u != nil {
		attrs = append(attrs, "input_tokens", u.InputTokens, "output_tokens", u.OutputTokens,
			"cache_read_tokens", u.CacheReadTokens, "total_tokens", u.Total)
	}
	attrs = append(attrs, extra...)
	level := slog.LevelInfo
	for i := 0; i+1 < len(extra); i += 2 {
		if k, _ := extra[i].(string); k != "request_changed" && k != "charged_price" {
			level = slog.LevelWarn // clamped counts, a bound charged
		}
	}
	if problem != "" {
		attrs = append(attrs, "unmetered", problem)
		level = slog.LevelWarn
	}
	g.log.Log(context.Background(), level, "model call", attrs...)
}

type spanKey struct{}

// withSpan gives a call in a trace a span of the gateway's own, a child of
// the caller's: the trace its traceparent names, or else, when the agent
// runs exactly one task in a trace, that task's (the header is set to it,
// as if the call carried it, and the access log says so). A call from an
// agent's own program while one task runs is tied to that task too.
func (g *Handler) withSpan(r *http.Request, agent string) *http.Request {
	tp, err := protocol.ParseTraceparent(r.Header.Get(protocol.HeaderTraceparent))
	if err != nil {
		if g.taskTrace == nil {
			return r
		}
		var ok bool
		if tp, ok = g.taskTrace(agent); !ok {
			return r
		}
		r.Header.Set(protocol.HeaderTraceparent, tp.String())
		r = r.WithContext(context.WithValue(r.Context(), tiedKey{}, true))
	}
	return r.WithContext(context.WithValue(r.Context(), spanKey{}, [2]protocol.TraceParent{tp, tp.Child()}))
}

// tiedKey marks a call tied to the agent's one running task.
type tiedKey struct{}

func tied(r *http.Request) bool { v, _ := r.Context().Value(tiedKey{}).(bool); return v }

// spanOf is the gateway's span of the call, if it has one.
func spanOf(r *http.Request) (protocol.TraceParent, bool) {
	sp, ok := r.Context().Value(spanKey{}).([2]protocol.TraceParent)
	return sp[1], ok
}

// span hands the call's span, ended now, to OnSpan.
func (g *Handler) span(agent, upstream string, r *http.Request, status int, start time.Time, problem string) {
	sp, ok := r.Context().Value(spanKey{}).([2]protocol.TraceParent)
	if !ok || g.onSpan == nil {
		return
	}
	s := protocol.Span{Trace: sp[1].Trace(), ID: sp[1].SpanHex(), Parent: sp[0].SpanHex(), Name: "gateway " + upstream, Kind: protocol.SpanServer,
		Start: start.UTC(), End: time.Now().UTC(), Attrs: map[string]string{
			"flock.agent": agent, "flock.upstream": upstream, "http.request.method": r.Method, "http.response.status_code": strconv.Itoa(status)}}
	if tied(r) {
		s.Attrs["flock.trace.from"] = "running task"
	}
	switch {
	case status >= 400:
		s.Error = "status " + strconv.Itoa(status)
	case problem != "":
		s.Error = problem
	}
	g.onSpan(s)
}

// traceOf is the trace ID of the call's traceparent header: the agent's
// task's trace when its program passes TRACEPARENT on, or the one it was
// tied to (withSpan); "" when none or malformed.
func traceOf(r *http.Request) string {
	return protocol.TraceIDOf(r.Header.Get(protocol.HeaderTraceparent))
}
