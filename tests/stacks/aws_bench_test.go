package stacks_test

import (
	"runtime"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// BenchmarkAWSStack500 runs the whole program for a 500-agent aws flock (and
// its default three-node bus) under the mock engine (about 5,500 resources).
// Target: under 15 s on 2 cores.
func BenchmarkAWSStack500(b *testing.B) {
	benchAWS500(b, awsStack, 503, "500 agents and 3 bus nodes")
}

// BenchmarkAWSGatewayStack500 is the same flock with a model gateway: each
// agent gains a token secret, the gateway its service, secrets and route out.
func BenchmarkAWSGatewayStack500(b *testing.B) {
	benchAWS500(b, awsGatewayStack, 504, "500 agents, 3 bus nodes and the gateway")
}

// benchAWS500 runs stack with 500 agents b.N times, checking that it declares
// that many ECS services (what says whose), and reports the memory used.
func benchAWS500(b *testing.B, stack func(testing.TB, capture.Config) *capture.Stack, services int, what string) {
	for i := 0; i < b.N; i++ {
		s := stack(b, capture.Config{"flock:agentCount": "500"})
		if n := len(s.ByType(awsrules.TypeService)); n != services {
			b.Fatalf("declared %d services, want %s", n, what)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
}
