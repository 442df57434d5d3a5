package gateway

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// A call that carries a traceparent (an agent's program passing on its
// task's TRACEPARENT) is tied to that trace in its usage report and access
// log, and the upstream gets the header too; a malformed one ties nothing.
func TestACallIsTiedToTheTraceItCarries(t *testing.T) {
	tg := newTestGateway(t, nil)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tp := range []string{"00-" + trace + "-00f067aa0ba902b7-01", "00-" + trace + "-00f067aa0ba902b7"} {
		if status := tracedCall(t, tg.url+"/anthropic/v1/messages", tp); status != 200 {
			t.Fatalf("status %d", status)
		}
	}
	// The report and the access log line are written as the call ends,
	// which may be just after the agent has the whole answer.
	testkit.WaitFor(t, 5*time.Second, "both calls reported and logged", func() bool {
		return len(tg.reported()) == 2 && strings.Count(tg.logs.String(), `"msg":"model call"`) == 2
	})
	traces := map[string]int{}
	for _, u := range tg.reported() {
		traces[u.Trace]++
	}
	if traces[trace] != 1 || traces[""] != 1 {
		t.Fatalf("usage reports' traces: %v", traces)
	}
	if logs := tg.logs.String(); strings.Count(logs, `"trace_id":"`+trace+`"`) != 1 {
		t.Fatalf("the access log names the trace %d times:\n%s", strings.Count(logs, trace), logs)
	}
	if seen := tg.up.requests(); seen[0].Header.Get("traceparent") == "" {
		t.Fatalf("the upstream did not get the traceparent")
	}
}

// A traced call is a span of the gateway's own: a child of the caller's
// span, named by the upstream, in error when the answer is one, and the
// parent the upstream is told of. An untraced call makes no span.
func TestATracedCallIsASpanOfTheGateways(t *testing.T) {
	var mu sync.Mutex
	var spans []protocol.Span
	tg := newTestGateway(t, func(c *Config) {
		c.OnSpan = func(s protocol.Span) { mu.Lock(); spans = append(spans, s); mu.Unlock() }
	})
	caller := protocol.NewTrace()
	call := func(path string, traced bool) int {
		tp := ""
		if traced {
			tp = caller.String()
		}
		return tracedCall(t, tg.url+path, tp)
	}
	if call("/anthropic/v1/messages", true) != 200 || call("/anthropic/v1/messages", false) != 200 || call("/nowhere/v1/messages", true) != 404 {
		t.Fatal("the calls did not go as set up")
	}
	testkit.WaitFor(t, 5*time.Second, "two spans", func() bool { mu.Lock(); defer mu.Unlock(); return len(spans) == 2 })
	mu.Lock()
	ok, missing := spans[0], spans[1]
	mu.Unlock()
	if ok.Attrs["flock.upstream"] != "anthropic" {
		ok, missing = missing, ok
	}
	if ok.Trace != caller.Trace() || ok.Parent != caller.SpanHex() || ok.ID == caller.SpanHex() || ok.Kind != protocol.SpanServer ||
		ok.Name != "gateway anthropic" || ok.Error != "" || ok.Attrs["flock.agent"] != "agent-1" || ok.Check() != nil || ok.End.Before(ok.Start) {
		t.Errorf("the call's span: %+v (caller %s)", ok, caller)
	}
	if missing.Error != "status 404" || missing.Parent != caller.SpanHex() {
		t.Errorf("the refused call's span: %+v", missing)
	}
	up := tg.up.requests()
	got, err := protocol.ParseTraceparent(up[0].Header.Get("traceparent"))
	if err != nil || got.Trace() != caller.Trace() || got.SpanHex() != ok.ID {
		t.Errorf("the upstream was told %q, want the gateway's span %s in trace %s", up[0].Header.Get("traceparent"), ok.ID, caller.Trace())
	}
	if up[1].Header.Get("traceparent") != "" {
		t.Errorf("an untraced call reached the upstream with a traceparent: %q", up[1].Header.Get("traceparent"))
	}
}

// A call without a traceparent is tied to the agent's one running task
// when there is one (TaskTrace): its usage report and span name that
// task's trace, and the access log says where the trace came from. A call
// that carries its own keeps it; with no such task there is no span.
func TestAnUntracedCallIsTiedToTheOneRunningTask(t *testing.T) {
	var mu sync.Mutex
	var spans []protocol.Span
	task := protocol.NewTrace()
	one := true
	tg := newTestGateway(t, func(c *Config) {
		c.OnSpan = func(s protocol.Span) { mu.Lock(); spans = append(spans, s); mu.Unlock() }
		c.TaskTrace = func(agent string) (protocol.TraceParent, bool) {
			mu.Lock()
			defer mu.Unlock()
			return task, agent == "agent-1" && one
		}
	})
	call := func(traceparent string) { tracedCall(t, tg.url+"/anthropic/v1/messages", traceparent) }
	own := protocol.NewTrace()
	call("")
	call(own.String())
	mu.Lock()
	one = false // two tasks, or none: nothing to tie to
	mu.Unlock()
	call("")
	testkit.WaitFor(t, 5*time.Second, "three calls reported", func() bool { return len(tg.reported()) == 3 })
	traces := map[string]int{}
	for _, u := range tg.reported() {
		traces[u.Trace]++
	}
	if traces[task.Trace()] != 1 || traces[own.Trace()] != 1 || traces[""] != 1 {
		t.Errorf("usage reports' traces: %v (task %s, own %s)", traces, task.Trace(), own.Trace())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2: %+v", len(spans), spans)
	}
	for _, s := range spans {
		switch s.Trace {
		case task.Trace():
			if s.Parent != task.SpanHex() || s.Attrs["flock.trace.from"] != "running task" {
				t.Errorf("the tied call's span: %+v", s)
			}
		case own.Trace():
			if s.Parent != own.SpanHex() || s.Attrs["flock.trace.from"] != "" {
				t.Errorf("the traced call's span: %+v", s)
			}
		default:
			t.Errorf("a span in no trace of the test's: %+v", s)
		}
	}
	if n := strings.Count(tg.logs.String(), `"trace_from":"the agent's one running task"`); n != 1 {
		t.Errorf("%d access log lines say the trace came from the running task, want 1:\n%s", n, tg.logs.String())
	}
}

// tracedCall posts a small Messages call to url with traceparent ("":
// none), reads the whole answer and returns its status.
func tracedCall(t *testing.T, url, traceparent string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
