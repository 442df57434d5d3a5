package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// benchRoot holds the host directories of the flock and of the floors: the
// user's /srv/flock is never touched.
const benchRoot = "/srv/flock-bench"

// bench is one run of the benchmark: a clone of the repository with its own
// Pulumi backend and stack, and the engine.
type bench struct {
	work, repo string
	env        []string
	parallel   int
	eng        *replay.Engine
	log        io.Writer
	logFile    *os.File
	// tmpl is the flock's agent-1 as the engine holds it (Config,
	// HostConfig) and its network: what the floors make again.
	tmpl, tmplNet map[string]any
	// deployed: a flock may stand on the engine (close destroys it).
	deployed bool
}

func newBench(ctx context.Context, parallel int, log io.Writer) (*bench, error) {
	root, err := capture.ProjectRoot()
	if err != nil {
		return nil, err
	}
	eng, err := replay.NewEngine()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "flock-deploy-bench.")
	if err != nil {
		return nil, err
	}
	b := &bench{work: work, repo: filepath.Join(work, "ai-flock"), parallel: parallel, eng: eng, log: log}
	if b.logFile, err = os.Create(filepath.Join(work, "commands.log")); err != nil {
		return nil, err
	}
	pass := make([]byte, 16)
	_, _ = rand.Read(pass)
	b.env = append(os.Environ(),
		"PULUMI_BACKEND_URL=file://"+filepath.Join(work, "backend"),
		"PULUMI_CONFIG_PASSPHRASE="+hex.EncodeToString(pass),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
	)
	if err := os.MkdirAll(filepath.Join(work, "backend"), 0o700); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "deploy-up: work in %s (commands' output in commands.log)\n", work)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	steps := [][]string{
		{"git", "clone", "-q", root, b.repo},
		{"make", "bin", "program"},
		{"pulumi", "stack", "init", "dev"},
		{"pulumi", "config", "set", "--secret", "flock:busSecret", hex.EncodeToString(secret)},
		{"pulumi", "config", "set", "--path", "flock:shared.root", benchRoot + "/flock/shared"},
		{"pulumi", "config", "set", "--path", "flock:shared.stateRoot", benchRoot + "/flock/state"},
	}
	for _, s := range steps {
		if err := b.cmd(ctx, s...); err != nil {
			b.close()
			return nil, err
		}
	}
	return b, nil
}

// cmd runs a command in the clone (its output to the log file).
func (b *bench) cmd(ctx context.Context, args ...string) error {
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Dir, c.Env, c.Stdout, c.Stderr = b.repo, b.env, b.logFile, b.logFile
	if args[0] == "git" {
		c.Dir = b.work
	}
	fmt.Fprintf(b.logFile, "$ %s\n", strings.Join(args, " "))
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w (see %s)", strings.Join(args[:min(len(args), 3)], " "), err, b.logFile.Name())
	}
	return nil
}

// close destroys a flock a failure left standing, then closes the log.
func (b *bench) close() {
	if b.deployed {
		fmt.Fprintln(b.log, "deploy-up: destroying the flock the failure left")
		if err := b.destroy(context.Background()); err != nil {
			fmt.Fprintf(b.log, "deploy-up: %v: destroy it by hand (PULUMI_BACKEND_URL=file://%s/backend, stack dev, in %s)\n", err, b.work, b.repo)
		}
	}
	_ = exec.Command("docker", "image", "rm", floorImage).Run()
	// Its root, once what was under it is gone (a failed destroy leaves it).
	_ = os.Remove(benchRoot)
	_ = b.logFile.Close()
}

// destroy destroys the flock and its host directories.
func (b *bench) destroy(ctx context.Context) error {
	if err := b.cmd(ctx, "pulumi", "destroy", "--yes", "--skip-preview", "--parallel", strconv.Itoa(b.parallel), "-s", "dev"); err != nil {
		return err
	}
	b.deployed = false
	// The next deploy starts from nothing, as a first one does: its quota
	// filesystems are made again.
	return os.RemoveAll(benchRoot + "/flock")
}

// setAgents sets the stack's agent count.
func (b *bench) setAgents(ctx context.Context, n int) error {
	return b.cmd(ctx, "pulumi", "config", "set", "flock:agentCount", strconv.Itoa(n))
}

// up runs pulumi up and returns how long it took until every one of want
// (container names) was healthy, and until pulumi up ended.
func (b *bench) up(ctx context.Context, label string, want []string) (healthy, ended time.Duration, err error) {
	start := time.Now()
	b.deployed = true
	d := &deploy{ended: make(chan struct{})}
	go func() {
		d.err = b.cmd(ctx, "pulumi", "up", "--yes", "--skip-preview", "--parallel", strconv.Itoa(b.parallel), "-s", "dev")
		d.took = time.Since(start)
		close(d.ended)
	}()
	healthy, err = b.waitHealthy(ctx, start, label, want, d)
	<-d.ended
	if err == nil {
		err = d.err
	}
	if err != nil {
		return 0, 0, err
	}
	return healthy, d.took, nil
}

// deploy is a pulumi up under way: ended closes when it ends, with err,
// after took.
type deploy struct {
	ended chan struct{}
	err   error
	took  time.Duration
}

// waitHealthy polls the engine until every container of want is healthy.
// A deploy that fails first ends the wait (d may be nil: nothing to watch).
func (b *bench) waitHealthy(ctx context.Context, start time.Time, label string, want []string, d *deploy) (time.Duration, error) {
	var ended <-chan struct{}
	if d != nil {
		ended = d.ended
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		names, err := b.eng.HealthyNames(ctx, label)
		if err != nil {
			return 0, err
		}
		if containsAll(names, want) {
			return time.Since(start), nil
		}
		select {
		case <-ended:
			if d.err != nil {
				return 0, d.err
			}
			ended = nil // it ended well: the health checks may still be due
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("not every container healthy within 10 minutes")
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// agentNames are the flock's agent containers' names for n agents.
func agentNames(prefix string, n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("%s-agent-%d", prefix, i))
	}
	return out
}

var flockAgents = protocol.LabelRole + "=agent"

// flockRun deploys n agents, records the figures, and (when more is set)
// adds one agent and runs a no-change up; it reads the template once, and
// destroys the flock.
func (b *bench) flockRun(ctx context.Context, n int, more bool, r *row) error {
	if err := b.setAgents(ctx, n); err != nil {
		return err
	}
	healthy, ended, err := b.up(ctx, flockAgents, agentNames("flock", n))
	if err != nil {
		return err
	}
	r.flock = append(r.flock, healthy)
	r.flockUp = append(r.flockUp, ended)
	fmt.Fprintf(b.log, "deploy-up: %d agents: every agent healthy in %.1f s (pulumi up ended at %.1f s)\n", n, healthy.Seconds(), ended.Seconds())
	if b.tmpl == nil {
		if b.tmpl, err = b.eng.Inspect(ctx, "flock-agent-1"); err != nil {
			return err
		}
		if b.tmplNet, err = b.eng.InspectNetwork(ctx, "flock-agent-1-net"); err != nil {
			return err
		}
		// The destroy removes the flock's images: the floors' own tag keeps
		// the agent image (the same one) for them.
		cfg, _ := b.tmpl["Config"].(map[string]any)
		if err := exec.CommandContext(ctx, "docker", "tag", fmt.Sprint(b.tmpl["Image"]), floorImage).Run(); err != nil || cfg == nil {
			return fmt.Errorf("tag the agent image for the floors: %v", err)
		}
		cfg["Image"] = floorImage
	}
	if more {
		if err := b.setAgents(ctx, n+1); err != nil {
			return err
		}
		one, _, err := b.up(ctx, flockAgents, []string{fmt.Sprintf("flock-agent-%d", n+1)})
		if err != nil {
			return err
		}
		r.addOne = append(r.addOne, one)
		start := time.Now()
		if err := b.cmd(ctx, "pulumi", "up", "--yes", "--skip-preview", "--parallel", strconv.Itoa(b.parallel), "-s", "dev"); err != nil {
			return err
		}
		r.noChange = append(r.noChange, time.Since(start))
		fmt.Fprintf(b.log, "deploy-up: one agent more: healthy in %.1f s; a no-change up took %.1f s\n", one.Seconds(), time.Since(start).Seconds())
	}
	start := time.Now()
	if err := b.destroy(ctx); err != nil {
		return err
	}
	r.destroy = append(r.destroy, time.Since(start))
	return nil
}
