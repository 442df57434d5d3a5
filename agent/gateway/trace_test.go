package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/testkit"
)

// A call that carries a traceparent (an agent's program passing on its
// task's TRACEPARENT) is tied to that trace in its usage report and access
// log, and the upstream gets the header too; a malformed one ties nothing.
func TestACallIsTiedToTheTraceItCarries(t *testing.T) {
	tg := newTestGateway(t, nil)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tp := range []string{"00-" + trace + "-00f067aa0ba902b7-01", "00-" + trace + "-00f067aa0ba902b7"} {
		req, _ := http.NewRequest("POST", tg.url+"/anthropic/v1/messages", strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", tp)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
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
