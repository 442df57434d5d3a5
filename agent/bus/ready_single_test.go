package bus_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/tests/bustest"
)

// A single bus is ready only while its JetStream is healthy: the check is
// nats-server's own (the one /healthz answers), as for a cluster node, not
// "it started once".
func TestSingleBusReadyMeansJetStreamHealthy(t *testing.T) {
	f := bustest.Start(t, bustest.Agents(1))
	if err := f.Bus.Ready(); err != nil {
		t.Fatalf("a started single bus is not ready: %v", err)
	}
	f.Bus.Shutdown()
	if err := f.Bus.Ready(); err == nil {
		t.Fatal("a single bus that was shut down still says it is ready")
	}
}
