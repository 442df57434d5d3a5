package cli_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/agent/tracing"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/otlprecv"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// A traced caller (TRACEPARENT, as a task's own process has it) sends its
// task in its trace: the agent runs it in the same trace; a malformed one
// is a warning, and the task runs in a trace of its own.
func TestTaskCarriesTheCallersTrace(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 1)
	self, _ := os.Executable()
	parent := protocol.NewTrace()
	e.env[protocol.EnvTraceparent] = parent.String()
	code, out, errOut := e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "0")
	var r protocol.Result
	if code != cli.ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil || r.Trace != parent.Trace() {
		t.Fatalf("exit %d, result %s (%s): want trace %s", code, out, errOut, parent.Trace())
	}
	e.env[protocol.EnvTraceparent] = "00-zz-1-01"
	code, out, errOut = e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "0")
	r = protocol.Result{}
	if code != cli.ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil || r.Trace == "" || r.Trace == parent.Trace() ||
		!strings.Contains(errOut, "TRACEPARENT ignored") {
		t.Fatalf("a malformed TRACEPARENT: exit %d, %s, %q", code, out, errOut)
	}
}

// With span export on, a traced task's spans reach an OTLP/HTTP receiver
// through the path a deployed flock's take: the operator sends the task
// (its send span, a child of the caller's), a real agent runs it (its run
// span, a child of the send), the services derive both from the bus and
// publish them, and the gateway's relay (here, as the gateway's bus user)
// exports them. An agent cannot publish spans of its own.
func TestATracedTasksSpansAreExported(t *testing.T) {
	t.Parallel()
	e := liveFlock(t, 1, bustest.WithSpans())
	recv := otlprecv.Start(t)
	exp, err := tracing.New(recv.URL, "flock-gateway", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := tracing.Relay(e.f.Connect(t, protocol.GatewayUser), exp, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// A hostile agent's forged span goes nowhere: the bus refuses it.
	a1 := e.f.Connect(t, "agent-1")
	forged, _ := json.Marshal(protocol.SpanBatch{V: 1, Spans: []protocol.Span{{Trace: strings.Repeat("ab", 16), ID: strings.Repeat("cd", 8), Name: "forged", Kind: protocol.SpanServer, Start: time.Now(), End: time.Now()}}})
	_ = a1.Publish(protocol.SpansSubject, forged)
	_ = a1.Flush()

	self, _ := os.Executable()
	caller := protocol.NewTrace()
	e.env[protocol.EnvTraceparent] = caller.String()
	code, out, errOut := e.run(t, "task", "--agent", "agent-1", "--json", "--", self, "tool", "exit", "3")
	var r protocol.Result
	if code == cli.ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &r) != nil || r.Trace != caller.Trace() {
		t.Fatalf("exit %d, result %s (%s)", code, out, errOut)
	}
	var send, run otlprecv.Span
	testkit.WaitFor(t, 15*time.Second, "the task's send and run spans at the receiver", func() bool {
		for _, s := range recv.Spans() {
			switch s.Name {
			case "task.send":
				send = s
			case "task.run":
				run = s
			}
		}
		return send.ID != "" && run.ID != ""
	})
	if send.Trace != caller.Trace() || send.Parent != caller.SpanHex() || send.Kind != tracepb.Span_SPAN_KIND_PRODUCER || send.Attrs["flock.task.id"] != r.TaskID {
		t.Errorf("send span %+v: want trace %s, parent %s (the caller's span), task %s", send, caller.Trace(), caller.SpanHex(), r.TaskID)
	}
	if run.Trace != caller.Trace() || run.Parent != send.ID || run.ID != r.Span || run.Kind != tracepb.Span_SPAN_KIND_CONSUMER ||
		!run.Error || run.Attrs["flock.agent"] != "agent-1" || run.Attrs["flock.task.status"] != r.Status || run.EndNano <= run.StartNano {
		t.Errorf("run span %+v: want a child of the send span %s, span %s, failed (%s), by agent-1", run, send.ID, r.Span, r.Status)
	}
	for _, s := range recv.Spans() {
		if s.Name == "forged" {
			t.Errorf("an agent's forged span was exported: %+v", s)
		}
	}
}
