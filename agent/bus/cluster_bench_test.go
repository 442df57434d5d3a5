package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// BenchmarkTaskStored is what a clustered bus costs a publisher: a task
// stored and acknowledged by one node, against three nodes that must each
// hold it (R3: the leader acks once a second node has it), on loopback in
// the same run. Sequential publishes measure latency; async ones
// (256 in flight) throughput.
//
//	go test -run X -bench TaskStored -benchtime 3000x ./agent/bus
func BenchmarkTaskStored(b *testing.B) {
	body := []byte(`{"v":1,"id":"bench","kind":"echo","stdin":"a task of about a hundred bytes, as the operator sends them"}`)
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *bustest.Bus
	}{
		{"1 node", func(tb testing.TB) *bustest.Bus { return bustest.Start(tb, bustest.Agents(3)) }},
		{"3 nodes", func(tb testing.TB) *bustest.Bus { return bustest.StartCluster(tb, bustest.Agents(3)) }},
	} {
		b.Run(tc.name+"/sync", func(b *testing.B) {
			js := bustest.JetStream(b, tc.start(b).Connect(b, protocol.OperatorUser))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			for range b.N {
				if _, err := js.Publish(ctx, protocol.SubjectTasksPool, body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
		b.Run(tc.name+"/async", func(b *testing.B) {
			js, err := jetstream.New(tc.start(b).Connect(b, protocol.OperatorUser), jetstream.WithPublishAsyncMaxPending(256))
			if err != nil {
				b.Fatal(err)
			}
			futures := make([]jetstream.PubAckFuture, 0, b.N)
			b.ResetTimer()
			for range b.N {
				f, err := js.PublishAsync(protocol.SubjectTasksPool, body)
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(5 * time.Minute):
				b.Fatal("acks never came")
			}
			b.StopTimer()
			for _, f := range futures {
				select {
				case err := <-f.Err():
					b.Fatalf("a task was not stored: %v", err)
				case <-f.Ok():
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
