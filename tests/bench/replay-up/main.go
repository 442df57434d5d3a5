// Command replay-up measures, in one run on the local Docker engine, how long
// each stack's replay takes from nothing to every task or container healthy,
// for the same agent counts: the dev stack (tests/e2e/replay) and the aws
// stack as Fargate runs it (tests/fargate), with its default three-node bus
// and with one node. Each figure is the median of its runs; images are built
// once first (the legacy builder's cache), so the figures are the flock's
// own start. Run it as root from the repository root (make bench):
//
//	go run ./tests/bench/replay-up [-agents 3,20] [-runs 1]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/tests/bench/benchcmd"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

func main() {
	benchcmd.Main("replay-up", func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
		counts := fs.String("agents", "3,20", "agent counts, comma-separated")
		runs := fs.Int("runs", 1, "runs of each row (the median is printed)")
		return func(ctx context.Context, stdout, stderr io.Writer) error {
			return measure(ctx, *counts, *runs, stdout, stderr)
		}
	})
}

func measure(ctx context.Context, counts string, runs int, stdout, stderr io.Writer) error {
	root, err := capture.ProjectRoot()
	if err != nil {
		return err
	}
	e, err := replay.NewEngine()
	if err != nil {
		return err
	}
	if err := e.Ping(ctx); err != nil {
		return fmt.Errorf("no Docker engine answers: %w", err)
	}
	if err := capture.BuildImageContext(root); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "replay-up-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "| agents | dev stack (1 bus node) | aws stack, Fargate replay (3 bus nodes) | aws, 1 bus node | aws 3 nodes / dev |\n|---|---|---|---|---|\n")
	for _, c := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-agents: %q is not a count", c)
		}
		var dev, aws3, aws1 []time.Duration
		for i := 0; i < runs; i++ {
			d, err := devUp(ctx, e, root, work, n)
			if err != nil {
				return fmt.Errorf("dev, %d agents: %w", n, err)
			}
			dev = append(dev, d)
			fmt.Fprintf(stderr, "dev stack, %d agents: every container healthy after %s\n", n, d.Round(time.Millisecond))
			for _, replicas := range []int{3, 1} {
				d, err := awsUp(ctx, e, root, work, n, replicas)
				if err != nil {
					return fmt.Errorf("aws, %d agents, %d bus nodes: %w", n, replicas, err)
				}
				fmt.Fprintf(stderr, "aws stack (Fargate replay), %d agents, %d bus nodes: every task healthy after %s\n", n, replicas, d.Round(time.Millisecond))
				if replicas == 3 {
					aws3 = append(aws3, d)
				} else {
					aws1 = append(aws1, d)
				}
			}
		}
		md, m3, m1 := benchcmd.Median(dev), benchcmd.Median(aws3), benchcmd.Median(aws1)
		fmt.Fprintf(stdout, "| %d | %.1f s | %.1f s | %.1f s | %.2f |\n", n, md.Seconds(), m3.Seconds(), m1.Seconds(), m3.Seconds()/md.Seconds())
	}
	return nil
}

// devUp replays the dev stack with n agents and waits until every container
// with a health check is healthy; then tears it down.
func devUp(ctx context.Context, e *replay.Engine, root, work string, n int) (time.Duration, error) {
	dir := filepath.Join(work, fmt.Sprintf("dev-%d", n))
	stack, err := capture.RunDev(capture.Config{
		"flock:name":       "bench",
		"flock:agentCount": strconv.Itoa(n),
		"flock:shared":     fmt.Sprintf(`{"root": %q, "stateRoot": %q}`, filepath.Join(dir, "shared"), filepath.Join(dir, "state")),
		"flock:network":    `{"pool": "10.213.0.0/16", "prefixLength": 29}`,
		"flock:limits":     `{"cpus": 0.5, "memoryMiB": 256, "pids": 128, "tmpfsMiB": 16, "taskTimeout": "60s", "concurrency": 2, "diskMiB": 64}`,
		"flock:docker":     `{"baseImage": "scratch"}`,
	})
	if err != nil {
		return 0, err
	}
	if err := replay.Clean(ctx, e); err != nil {
		return 0, err
	}
	start := time.Now()
	f, err := replay.Replay(ctx, e, stack, root, func(string, ...any) {})
	if f != nil {
		defer func() { _ = f.Teardown(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		return 0, err
	}
	for {
		healthy := 0
		for _, id := range f.Containers {
			doc, err := e.Inspect(ctx, id)
			if err != nil {
				return 0, err
			}
			st, _ := doc["State"].(map[string]any)
			h, _ := st["Health"].(map[string]any)
			if h == nil || h["Status"] == "healthy" {
				healthy++
			}
		}
		if healthy == len(f.Containers) {
			return time.Since(start), nil
		}
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("%d of %d containers healthy after 5 minutes", healthy, len(f.Containers))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// awsUp runs the aws stack's services with n agents as Fargate would, from
// the first service created to every task healthy; then tears them down.
func awsUp(ctx context.Context, e *replay.Engine, root, work string, n, replicas int) (time.Duration, error) {
	cfg, err := capture.StackConfig("aws")
	if err != nil {
		return 0, err
	}
	cfg["flock:name"] = "bench"
	cfg["flock:agentCount"] = strconv.Itoa(n)
	cfg["flock:bus"] = fmt.Sprintf(`{"replicas": %d}`, replicas)
	cfg["flock:aws"] = `{"baseImage": "scratch"}`
	cfg, secrets := capture.WithSecret(cfg)
	stack, err := capture.Run("aws", cfg, secrets...)
	if err != nil {
		return 0, err
	}
	m, err := fargate.Read(stack)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(work, fmt.Sprintf("aws-%d-%d", n, replicas))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	c, err := fargate.New(ctx, e, m, fargate.Options{Root: root, Work: dir})
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Down(context.WithoutCancel(ctx)) }()
	start := time.Now()
	if err := c.Up(ctx); err != nil {
		return 0, err
	}
	if err := c.WaitHealthy(ctx, 10*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
