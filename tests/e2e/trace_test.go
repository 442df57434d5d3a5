package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/fakemodel"
	"github.com/ai-flock/ai-flock/tests/otlprecv"
)

// One trace across the operator, the agent in its container and the
// gateway: a task sent in a trace runs the example AI agent, which passes
// its TRACEPARENT on; the result, the gateway's usage report and the audit
// trail's entries all name that trace, and its spans reach the flock's
// OTLP collector (the fake model's receiver) chained as they ran.
func TestATraceCrossesOperatorAgentAndGateway(t *testing.T) {
	skipUnderGVisor(t, gatewayFunction)
	f := needGateway(t)
	_, usage := watchUsage(t, f, programAgent)
	cl := operatorClient(t)
	ctx := testContext(t, 90*time.Second)
	parent := protocol.NewTrace()
	id := taskID(t, "trace")
	task := protocol.Task{ID: id, Kind: protocol.KindExec, Command: "/shared/common/bin/ai-agent", Args: []string{"ask", "What is a trace?"}}
	res, err := cl.Run(operator.WithTrace(ctx, parent), operator.Target{Agent: programAgent}, task, nil)
	if err != nil || len(res) != 1 || !res[0].OK() {
		t.Fatalf("the traced task: %v %+v", err, res)
	}
	if res[0].Trace != parent.Trace() {
		t.Fatalf("the agent ran it in trace %q, want %q", res[0].Trace, parent.Trace())
	}
	msg, err := usage.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no usage for %s: %v", programAgent, err)
	}
	var u protocol.Usage
	if err := json.Unmarshal(msg.Data, &u); err != nil || u.Trace != parent.Trace() {
		t.Fatalf("the gateway's usage report: %s (%v), want trace %s", msg.Data, err, parent.Trace())
	}
	kinds := map[string]bool{}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(kinds) < 3; time.Sleep(500 * time.Millisecond) {
		err := audit.Each(ctx, cl.JetStream(), audit.Filter{Agent: programAgent}, func(_ uint64, _ []byte, e protocol.AuditEntry) error {
			if e.Trace == parent.Trace() {
				kinds[e.Kind] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{protocol.AuditTaskSent, protocol.AuditTaskResult, protocol.AuditGatewayCall} {
		if !kinds[k] {
			t.Errorf("no %s entry in the trace (have %v)", k, kinds)
		}
	}
	checkExportedSpans(t, parent, res[0])
}

// fakeSpans are the spans the fake model's OTLP receiver holds: the e2e
// flock exports to it (flock:otlp.endpoint), through the gateway's egress.
func fakeSpans() ([]otlprecv.Span, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + fakeModelAddr + fakemodel.SpansPath)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var spans []otlprecv.Span
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &spans); err != nil {
		return nil, fmt.Errorf("%s: %w", b, err)
	}
	return spans, nil
}

// checkExportedSpans: the trace's spans reach the collector from the
// deployed flock: the operator's send (a child of the caller's span), the
// agent's run (a child of the send, as the agent's result names it) and the
// gateway's call (a child of the run: the program passed its TRACEPARENT on).
func checkExportedSpans(t *testing.T, caller protocol.TraceParent, run protocol.Result) {
	t.Helper()
	byName := map[string]otlprecv.Span{}
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(byName) < 3; time.Sleep(500 * time.Millisecond) {
		spans, err := fakeSpans()
		last = err
		for _, s := range spans {
			if s.Trace == caller.Trace() {
				byName[s.Name] = s
			}
		}
	}
	send, ran, call := byName["task.send"], byName["task.run"], byName["gateway anthropic"]
	if send.ID == "" || ran.ID == "" || call.ID == "" {
		t.Fatalf("spans of trace %s at the collector: %+v (last read: %v)", caller.Trace(), byName, last)
	}
	if send.Parent != caller.SpanHex() || ran.Parent != send.ID || ran.ID != run.Span || call.Parent != ran.ID {
		t.Errorf("the spans do not chain caller %s → send → run → gateway call:\nsend %+v\nrun %+v (the result's span %s)\ncall %+v", caller.SpanHex(), send, ran, run.Span, call)
	}
	if send.Service != "flock-gateway" || call.Attrs["flock.agent"] != programAgent || ran.Attrs["flock.agent"] != programAgent {
		t.Errorf("the spans' service and agents: send %+v, run %+v, call %+v", send, ran, call)
	}
}
