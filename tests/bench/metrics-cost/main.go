// Command metrics-cost weighs the metrics exporter and the audit writer on
// the trivial-task throughput: the same load (echo tasks, no process, on 3
// agents and a one-node bus, all in this process) with both on and both
// off, interleaved, and prints the medians and their ratio.
//
//	go run ./tests/bench/metrics-cost [-runs 5] [-tasks 20000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/ai-flock/ai-flock/tests/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "metrics-cost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("metrics-cost", flag.ContinueOnError)
	runs := fs.Int("runs", 5, "runs of each, interleaved")
	tasks := fs.Int("tasks", 20000, "tasks per run")
	agents := fs.Int("agents", 3, "agents")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var on, off []float64
	for i := range 2 * *runs {
		l := bench.Load{Agents: *agents, Concurrency: 2, Tasks: *tasks, NoMetrics: i%2 == 1, NoAudit: i%2 == 1}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		s, err := bench.Throughput(rctx, l)
		cancel()
		if err != nil {
			return err
		}
		if l.NoMetrics {
			off = append(off, s.PerSec)
		} else {
			on = append(on, s.PerSec)
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	mOn, mOff := med(on), med(off)
	fmt.Printf("| trivial tasks, %d agents x 2 slots, one-node bus (median of %d) | tasks/s |\n|---|---|\n", *agents, *runs)
	fmt.Printf("| exporter and audit off | %.0f (%.0f-%.0f) |\n", mOff, off[0], off[len(off)-1])
	fmt.Printf("| exporter and audit on | %.0f (%.0f-%.0f) |\n", mOn, on[0], on[len(on)-1])
	fmt.Printf("| on / off | %.3f (cost %.1f %%; goal at most 10 %%) |\n", mOn/mOff, 100*(1-mOn/mOff))
	return nil
}
