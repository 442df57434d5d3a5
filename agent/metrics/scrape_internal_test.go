package metrics

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A clustered bus answers a stream list only once it has every stream
// leader's answer or its gather window has passed, and then with what it
// has. A scrape must wait that out: giving up first loses every stream's
// series, not just the slow one's (the services' EMF documents on a
// three-node bus once carried no stream series at all). The bus here is
// played by a responder that answers as such a server does, after the
// window, one stream listed and one missing.
func TestAScrapeWaitsOutTheBussGatherWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the bus's 4 s gather window")
	}
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("test server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	tasks := map[string]any{"config": map[string]any{"name": "FLOCK_TASKS", "subjects": []string{"flock.task.>"}}, "state": map[string]any{"messages": 5, "bytes": 1234}}
	answer := func(subject string, after time.Duration, body map[string]any) {
		b, _ := json.Marshal(body)
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
			time.Sleep(after)
			_ = m.Respond(b)
		}); err != nil {
			t.Fatal(err)
		}
	}
	answer("$JS.API.STREAM.LIST", busGatherWindow+300*time.Millisecond, map[string]any{
		"type": "io.nats.jetstream.api.v1.stream_list_response", "total": 1, "offset": 0, "limit": 256,
		"streams": []any{tasks}, "missing": []string{"FLOCK_MAIL_agent-1"}})
	answer("$JS.API.STREAM.INFO.FLOCK_TASKS", 0, tasks)
	answer("$JS.API.CONSUMER.LIST.FLOCK_TASKS", 0, map[string]any{
		"type": "io.nats.jetstream.api.v1.consumer_list_response", "total": 0, "offset": 0, "limit": 256, "consumers": []any{}})

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Start(nc, js, Config{Agents: func() []string { return []string{"agent-1"} }, IsAgent: func(id string) bool { return id == "agent-1" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	out, err := e.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`flock_stream_bytes{stream="FLOCK_TASKS"} 1234`, `flock_stream_messages{stream="FLOCK_TASKS"} 5`, "flock_bus_up 1"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("no %s in a scrape whose stream list came %s after it asked (scrape timeout %s):\n%s", want, busGatherWindow+300*time.Millisecond, DefaultScrapeTimeout, out)
		}
	}
}
