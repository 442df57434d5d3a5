// Command flock-bench measures the agent and prints the table the README
// quotes: idle RSS, image size, first-heartbeat time, and tasks per second
// with p50/p99 publish-to-result latency for 1, 3 and 10 agents and for a
// process-spawning task. Run it from the repository root:
//
//	go run ./tests/bench/flock-bench [-tasks 20000] [-docker=auto|yes|no]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/ai-flock/ai-flock/tests/bench"
	"github.com/ai-flock/ai-flock/tests/bench/benchcmd"
	"github.com/ai-flock/ai-flock/tests/capture"
)

func main() {
	benchcmd.Main("flock-bench", func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
		tasks := fs.Int("tasks", 20000, "trivial tasks per throughput row")
		execTasks := fs.Int("exec-tasks", 1000, "tasks for the process-spawning row")
		concurrency := fs.Int("concurrency", 2, "task slots per agent (the flock default is 2)")
		docker := fs.String("docker", "auto", "build the scratch image to measure its size: auto, yes, no")
		return func(ctx context.Context, _, _ io.Writer) error {
			return measure(ctx, *tasks, *execTasks, *concurrency, *docker)
		}
	})
}

func measure(ctx context.Context, tasks, execTasks, concurrency int, docker string) error {
	root, err := bench.ModuleRoot()
	if err != nil {
		return err
	}
	// The images' build context, as make bin prepares it (this machine's
	// architecture); the agent measured here is the image's binary.
	fmt.Fprintln(os.Stderr, "building agent/bin (the images' binaries) ...")
	if err := capture.BuildImageContext(root); err != nil {
		return err
	}
	agentBin := filepath.Join(root, "agent", "bin", "linux-"+runtime.GOARCH, "flock-agent")
	st, _ := os.Stat(agentBin)

	type row struct{ name, value, goal string }
	var rows []row
	add := func(name, value, goal string) {
		rows = append(rows, row{name, value, goal})
		fmt.Fprintf(os.Stderr, "  %s: %s\n", name, value)
	}
	add("agent binary (static, stripped)", fmt.Sprintf("%.1f MiB", float64(st.Size())/(1<<20)), "")

	image := "n/a (no Docker engine)"
	useDocker := docker == "yes" || (docker == "auto" && exec.Command("docker", "version").Run() == nil)
	if useDocker {
		for _, target := range []string{"agent", "bus"} {
			size, err := bench.ImageSize(ctx, root, target)
			v := fmt.Sprintf("%.1f MiB", float64(size)/(1<<20))
			if err != nil {
				v = "n/a: " + err.Error()
			}
			goal := ""
			if target == "agent" {
				goal = "< 20 MiB"
			}
			add(target+" image (FROM scratch)", v, goal)
		}
	} else {
		add("agent image (FROM scratch)", image, "< 20 MiB")
	}

	hbs, rss, err := bench.Startup(ctx, agentBin, 5, 2*time.Second)
	if err != nil {
		return err
	}
	add("agent idle RSS (median of 5, after 2 s idle)", fmt.Sprintf("%.1f MiB", float64(bench.Median(rss))/1024), "< 15 MiB")
	add("process start -> first heartbeat (median of 5)", fmt.Sprintf("%.1f ms (max %.1f ms)", ms(bench.Median(hbs)), ms(maxOf(hbs))), "< 100 ms")

	loads := []bench.Load{
		{Agents: 1, Tasks: tasks},
		{Agents: 3, Tasks: tasks},
		{Agents: 10, Tasks: tasks},
		{Agents: 3, Tasks: tasks, Pool: true},
		{Agents: 3, Tasks: execTasks, Exec: agentBin},
	}
	for _, l := range loads {
		l.Concurrency = concurrency
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		s, err := bench.Throughput(rctx, l)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", l.Name(), err)
		}
		goal := ""
		if l.Agents == 3 && l.Exec == "" && !l.Pool {
			goal = ">= 5000/s, p99 < 20 ms"
		}
		add(l.Name(), fmt.Sprintf("%.0f tasks/s, p50 %.2f ms, p99 %.2f ms (%d tasks)", s.PerSec, ms(s.P50), ms(s.P99), s.Tasks), goal)
	}

	fmt.Printf("\n| measure | value | goal |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r.name, r.value, r.goal)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
