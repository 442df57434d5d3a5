package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/tests/bench/benchcmd"
)

// row is one agent count's figures, a value per run.
type row struct {
	n                         int
	flock, flockUp            []time.Duration // to every agent healthy; to pulumi up's end
	alone, withWork           []time.Duration // the two floors
	addOne, noChange, destroy []time.Duration
}

type results struct{ rows []*row }

// measure runs every count runs times: the flock (deploy, figures,
// destroy), then the two floors, in turn, so that each run's three figures
// meet the same machine. A first deploy of 3 agents builds the images.
func (b *bench) measure(ctx context.Context, ns []int, runs int) (*results, error) {
	fmt.Fprintln(b.log, "deploy-up: a first deploy of 3 agents builds the images (not counted)")
	if err := b.flockRun(ctx, 3, false, &row{}); err != nil {
		return nil, err
	}
	res := &results{}
	largest := ns[len(ns)-1]
	for _, n := range ns {
		r := &row{n: n}
		res.rows = append(res.rows, r)
		for i := range runs {
			fmt.Fprintf(b.log, "deploy-up: %d agents, run %d of %d\n", n, i+1, runs)
			if err := b.flockRun(ctx, n, n == largest, r); err != nil {
				return nil, err
			}
			alone, err := b.floor(ctx, n, false)
			if err != nil {
				return nil, fmt.Errorf("containers alone: %w", err)
			}
			work, err := b.floor(ctx, n, true)
			if err != nil {
				return nil, fmt.Errorf("containers and per-agent work: %w", err)
			}
			r.alone, r.withWork = append(r.alone, alone), append(r.withWork, work)
			fmt.Fprintf(b.log, "deploy-up: floors: containers alone %.1f s, with the per-agent work %.1f s\n", alone.Seconds(), work.Seconds())
		}
	}
	return res, nil
}

// machine names what the figures were measured on.
func (b *bench) machine(ctx context.Context) string {
	out, _ := exec.CommandContext(ctx, "docker", "info", "-f", "{{.ServerVersion}} {{.Driver}} {{.KernelVersion}}").Output()
	f := strings.Fields(string(out))
	for len(f) < 3 {
		f = append(f, "?")
	}
	return fmt.Sprintf("%d CPUs (%s), Docker Engine %s, storage driver %s, kernel %s", runtime.NumCPU(), runtime.GOARCH, f[0], f[1], f[2])
}

func (res *results) print(w io.Writer, machine string, runs, parallel int) {
	fmt.Fprintf(w, "\nDeploy to every agent healthy, median of %d run(s), parallelism %d; %s\n\n", runs, parallel, machine)
	fmt.Fprintln(w, "| agents | flock: pulumi up to all healthy | (pulumi up ended) | floor 1: containers alone | floor 2: + per-agent work | flock / floor 2 | flock / floor 1 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range res.rows {
		f, a, wk := benchcmd.Median(r.flock), benchcmd.Median(r.alone), benchcmd.Median(r.withWork)
		fmt.Fprintf(w, "| %d | %.1f s | %.1f s | %.1f s | %.1f s | %.2fx | %.2fx |\n", r.n, f.Seconds(), benchcmd.Median(r.flockUp).Seconds(), a.Seconds(), wk.Seconds(), ratio(f, wk), ratio(f, a))
	}
	last := res.rows[len(res.rows)-1]
	fmt.Fprintf(w, "\n| with %d agents running | median |\n|---|---:|\n", last.n)
	fmt.Fprintf(w, "| add one agent (pulumi up to it healthy) | %.1f s |\n", benchcmd.Median(last.addOne).Seconds())
	fmt.Fprintf(w, "| no-change `pulumi up --yes --skip-preview` | %.1f s |\n", benchcmd.Median(last.noChange).Seconds())
	fmt.Fprintf(w, "| `pulumi destroy` (%d+1 agents) | %.1f s |\n", last.n, benchcmd.Median(last.destroy).Seconds())
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}
