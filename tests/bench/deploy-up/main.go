// Command deploy-up measures, on this machine's Docker engine, how long the
// dev stack takes to deploy for real (the Pulumi CLI with the docker and
// command provider plugins, as `make deploy` runs them) beside two floors
// measured in the same run:
//
//   - containers alone: the same agent containers (image, Config and
//     HostConfig read back from the flock's own agent-1), each on its own new
//     internal network with its own UID, made straight through the Engine
//     API with the same parallelism, their health check the same interval
//     but passing at once;
//   - containers and the flock's per-agent work with plain tools: the same,
//     plus each agent's quota filesystem and credentials (the flock's own
//     prepare script, run by sh), the bus joining its network (docker
//     network connect, as the flock's step does) and its PIDs limit (docker
//     update), and the bus (one more container).
//
// For the largest count it also measures adding one agent to the running
// flock (to that agent healthy) and a no-change `pulumi up --skip-preview`.
// Each figure is the median of its runs. The flock's images are built once
// first (a deploy of 3 agents, not counted). It works in its own clone,
// backend, stack and host directories (/srv/flock-bench) and leaves nothing.
// Run as root from the repository root with the toolchain installed:
//
//	go run ./tests/bench/deploy-up [-agents 3,20,50] [-runs 3] [-parallel 16]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/tests/bench/benchcmd"
)

func main() {
	benchcmd.Main("deploy-up", func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
		counts := fs.String("agents", "3,20,50", "agent counts, comma-separated")
		runs := fs.Int("runs", 3, "runs of each row (the median is printed)")
		parallel := fs.Int("parallel", 16, "pulumi up --parallel, and the floors' parallelism")
		return func(ctx context.Context, stdout, stderr io.Writer) error {
			ns, err := parseCounts(*counts)
			if err != nil || *runs < 1 || *parallel < 1 {
				return benchcmd.Usage{Err: fmt.Errorf("-agents wants counts from 1 to 200 (got %q), -runs and -parallel at least 1", *counts)}
			}
			if err := ready(); err != nil {
				return benchcmd.Usage{Err: err}
			}
			b, err := newBench(ctx, *parallel, stderr)
			if err != nil {
				return err
			}
			defer b.close()
			res, err := b.measure(ctx, ns, *runs)
			if err != nil {
				return err
			}
			res.print(stdout, b.machine(ctx), *runs, *parallel)
			return nil
		}
	})
}

func parseCounts(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 200 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return slices.Compact(ns), nil
}

// ready says what is missing to run: root, an engine, the toolchain, and
// no flock of anyone else's on the engine.
func ready() error {
	if os.Geteuid() != 0 {
		return errors.New("run as root: the flock's host steps make directories owned by the agents' UIDs")
	}
	if _, err := exec.LookPath("pulumi"); err != nil {
		return errors.New("no pulumi CLI on PATH: this benchmark runs the real toolchain (docs/development.md says how to build it)")
	}
	out, err := exec.Command("pulumi", "plugin", "ls").Output()
	if err != nil {
		return fmt.Errorf("pulumi plugin ls: %w", err)
	}
	for _, p := range [][2]string{{"docker", "4.10.0"}, {"command", "1.2.0"}} {
		if !hasPlugin(string(out), p[0], p[1]) {
			return fmt.Errorf("the %s %s provider plugin is not installed (pulumi plugin ls)", p[0], p[1])
		}
	}
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=ai-flock.flock").Output(); err != nil {
		return fmt.Errorf("no Docker engine answers: %w", err)
	} else if len(strings.TrimSpace(string(out))) > 0 {
		return errors.New("a flock already runs on this engine (docker ps --filter label=ai-flock.flock): destroy it first")
	}
	return nil
}

// hasPlugin says whether `pulumi plugin ls` lists the resource plugin
// name at version (its columns: NAME KIND VERSION …).
func hasPlugin(list, name, version string) bool {
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == name && f[1] == "resource" && f[2] == version {
			return true
		}
	}
	return false
}
