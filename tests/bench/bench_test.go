package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/tests/bustest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binDir    string
	buildOnce sync.Once
	agentBin  string
	buildErr  error
)

// binary builds the real agent binary once per test process.
func binary(b *testing.B) string {
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "flock-bench-bin-") // outlives one benchmark run; removed in TestMain
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		agentBin = filepath.Join(dir, "flock-agent")
		buildErr = Build(root, "./agent/cmd/flock-agent", agentBin)
	})
	if buildErr != nil {
		b.Skipf("cannot build the agent: %v", buildErr)
	}
	return agentBin
}

func benchLoad(b *testing.B, l Load) {
	l.Tasks = max(b.N, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	s, err := Throughput(ctx, l)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(s.PerSec, "tasks/s")
	b.ReportMetric(float64(s.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(s.P99.Microseconds())/1000, "p99-ms")
}

func BenchmarkEcho1Agent(b *testing.B)   { benchLoad(b, Load{Agents: 1}) }
func BenchmarkEcho3Agents(b *testing.B)  { benchLoad(b, Load{Agents: 3}) }
func BenchmarkEcho10Agents(b *testing.B) { benchLoad(b, Load{Agents: 10}) }
func BenchmarkEchoPool3Agents(b *testing.B) {
	benchLoad(b, Load{Agents: 3, Pool: true})
}
func BenchmarkExec3Agents(b *testing.B) { benchLoad(b, Load{Agents: 3, Exec: binary(b)}) }

// BenchmarkStartup: process start to first heartbeat, and idle RSS.
func BenchmarkStartup(b *testing.B) {
	bin := binary(b)
	b.ResetTimer()
	hbs, rss, err := Startup(context.Background(), bin, max(1, min(b.N, 5)), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(Median(hbs).Microseconds())/1000, "first-heartbeat-ms")
	b.ReportMetric(float64(Median(rss))/1024, "idle-RSS-MiB")
}

// BenchmarkMetricsCostThreeNodes: the exporter's and the audit writer's cost on the trivial-task
// throughput with a three-node bus (every node on loopback, R3 streams),
// on and off interleaved in one run (tests/bench/metrics-cost is the
// one-node figure). Reports both medians and on/off.
//
//	go test -run NONE -bench MetricsCostThreeNodes -benchtime 3x ./tests/bench
func BenchmarkMetricsCostThreeNodes(b *testing.B) {
	var on, off []float64
	for i := range 2 * b.N {
		l := Load{Agents: 3, Concurrency: 2, Tasks: 10000, NoMetrics: i%2 == 1, NoAudit: i%2 == 1}
		cfg, opts := l.Bus()
		f := bustest.StartCluster(b, cfg, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		s, err := ThroughputOn(ctx, f, b.TempDir(), l)
		cancel()
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if l.NoMetrics {
			off = append(off, s.PerSec)
		} else {
			on = append(on, s.PerSec)
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(off), "tasks/s-off")
	b.ReportMetric(med(on), "tasks/s-on")
	b.ReportMetric(med(on)/med(off), "on/off")
}
