package stacks_test

import (
	"runtime"
	"testing"
)

// BenchmarkDevStack500 runs the whole program for a 500-agent dev flock under
// the mock engine. Target: under 10 s and under 1 GiB peak memory on 2 cores
// (tests/bench.sh measures the process's peak RSS around it).
func BenchmarkDevStack500(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s := dev(b, count(500))
		if n := len(agentContainers(b, s)); n != 500 {
			b.Fatalf("declared %d agents", n)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
}
