package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/audit"
	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/protocol"
)

// One trace across the operator, the agent in its container and the
// gateway: a task sent in a trace runs the example AI agent, which passes
// its TRACEPARENT on; the result, the gateway's usage report and the audit
// trail's entries all name that trace.
func TestATraceCrossesOperatorAgentAndGateway(t *testing.T) {
	skipUnderGVisor(t, gatewayFunction)
	f := needGateway(t)
	_, usage := watchUsage(t, f, programAgent)
	cl := operatorClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
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
}
