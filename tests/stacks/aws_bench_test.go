package stacks_test

import (
	"runtime"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// BenchmarkAWSStack500 runs the whole program for a 500-agent aws flock (and
// its default three-node bus) under the mock engine (about 5,500 resources).
// Target: under 15 s on 2 cores.
func BenchmarkAWSStack500(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := awsStack(b, capture.Config{"flock:agentCount": "500"})
		if n := len(s.ByType(capture.TypeService)); n != 503 {
			b.Fatalf("declared %d services, want 500 agents and 3 bus nodes", n)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
}

// BenchmarkAWSGatewayStack500 is the same flock with a model gateway: each
// agent gains a token secret, the gateway its service, secrets and route out.
func BenchmarkAWSGatewayStack500(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := awsGatewayStack(b, capture.Config{"flock:agentCount": "500"})
		if n := len(s.ByType(capture.TypeService)); n != 504 {
			b.Fatalf("declared %d services, want 500 agents, 3 bus nodes and the gateway", n)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
}
