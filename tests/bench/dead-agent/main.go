// Command dead-agent measures how long a plan takes when one of its agents
// dies mid-plan, beside the same plan with none killed and with the killed
// agent started again at once, in the same run: three agents (each its own
// flock-agent process, as in a container), a one-node bus with the board,
// and a plan of 6 levels of 5 run tasks (each `sleep 1`, each needing two
// tasks of the level above). The killed agent gets SIGKILL 4 s after the
// apply, holding a task: its claim ends within one lease (30 s) and another
// agent takes it; started again, its runtime gives the claim back at once.
// The target is the plan done within the run without a kill plus 45 s.
//
//	go run ./tests/bench/dead-agent [-runs 1] [-levels 6] [-width 5]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ai-flock/ai-flock/agent/board"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bench"
	"github.com/ai-flock/ai-flock/tests/bench/benchcmd"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

func main() {
	benchcmd.Main("dead-agent", func(fs *flag.FlagSet) func(context.Context, io.Writer, io.Writer) error {
		runs := fs.Int("runs", 1, "runs of each case")
		levels := fs.Int("levels", 6, "levels of the plan")
		width := fs.Int("width", 5, "tasks per level")
		killAfter := fs.Duration("kill-after", 4*time.Second, "when agent-2 is killed, after the apply")
		return func(ctx context.Context, stdout, _ io.Writer) error {
			return measure(ctx, stdout, *runs, *levels, *width, *killAfter)
		}
	})
}

// The cases, each run on a fresh bus.
const (
	none    = "none killed"
	killed  = "agent-2 killed"
	restart = "agent-2 killed, started again at once"
)

func measure(ctx context.Context, out io.Writer, runs, levels, width int, killAfter time.Duration) error {
	root, err := bench.ModuleRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "flock-dead-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "flock-agent")
	if err := bench.Build(root, "./agent/cmd/flock-agent", bin); err != nil {
		return err
	}
	p := thePlan(levels, width)
	got := map[string][]time.Duration{}
	for r := range runs {
		for _, c := range []string{none, killed, restart} {
			dir := filepath.Join(tmp, fmt.Sprintf("%d-%d", r, len(got)))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			d, err := once(ctx, dir, bin, p, c, killAfter)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			fmt.Fprintf(os.Stderr, "  %s: plan done in %s\n", c, d.Round(10*time.Millisecond))
			got[c] = append(got[c], d)
		}
	}
	base := bench.Median(got[none])
	fmt.Fprintf(out, "a %d-task plan (%d levels of %d, 1 s each), 3 agents, agent-2 killed %s after the apply (go run ./tests/bench/dead-agent):\n", levels*width, levels, width, killAfter)
	fmt.Fprintf(out, "| case | plan done in (median of %d) | target |\n|---|---|---|\n", runs)
	fmt.Fprintf(out, "| %s | %s | |\n", none, base.Round(10*time.Millisecond))
	k := bench.Median(got[killed])
	fmt.Fprintf(out, "| %s | %s (+%s) | within %s (+45 s) |\n", killed, k.Round(10*time.Millisecond), (k - base).Round(10*time.Millisecond), (base + 45*time.Second).Round(time.Second))
	rs := bench.Median(got[restart])
	fmt.Fprintf(out, "| %s | %s (+%s) | |\n", restart, rs.Round(10*time.Millisecond), (rs - base).Round(10*time.Millisecond))
	if k > base+45*time.Second {
		return fmt.Errorf("with agent-2 killed the plan took %s, past the target of %s", k, base+45*time.Second)
	}
	return nil
}

// thePlan is levels of width run tasks, each needing two of the level
// above (the first level none).
func thePlan(levels, width int) protocol.BoardPlan {
	p := protocol.BoardPlan{Plan: "dead-agent"}
	for l := range levels {
		for i := range width {
			s := protocol.BoardTaskSpec{ID: fmt.Sprintf("l%d-%d", l, i), Run: []string{"/bin/sleep", "1"}}
			if l > 0 {
				s.Needs = []string{fmt.Sprintf("l%d-%d", l-1, i), fmt.Sprintf("l%d-%d", l-1, (i+1)%width)}
			}
			p.Tasks = append(p.Tasks, s)
		}
	}
	return p
}

// once runs the plan on a fresh bus with three agent processes and says
// how long from the apply to its last task done.
func once(ctx context.Context, dir, bin string, p protocol.BoardPlan, c string, killAfter time.Duration) (time.Duration, error) {
	f, err := bustest.New(dir, bustest.Agents(3), nil, bustest.WithoutMetrics(), bustest.WithoutAudit())
	if err != nil {
		return 0, err
	}
	defer f.Close()
	procs := map[string]*exec.Cmd{}
	defer func() {
		for _, cmd := range procs {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	}()
	start := func(id string) error {
		seed, err := f.WriteSeed(id)
		if err != nil {
			return err
		}
		cmd := exec.Command(bin)
		cmd.Env = []string{
			"AGENT_ID=" + id, "NATS_URL=" + f.URL, "SHARED_DIR=" + filepath.Join(dir, "shared"),
			"NATS_NKEY_FILE=" + seed, "LOG_FILE=-", "LOG_LEVEL=error", "STATUS_FILE=" + filepath.Join(dir, id+".status"),
			"GRACE_PERIOD=2s",
		}
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		procs[id] = cmd
		return nil
	}
	nc, err := f.DialUser(protocol.OperatorUser)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	ready := make(chan string, 8)
	sub, err := nc.Subscribe(protocol.SubjectEvents, func(m *nats.Msg) {
		var e protocol.Event
		if json.Unmarshal(m.Data, &e) == nil && e.Type == protocol.EventReady {
			ready <- e.Agent
		}
	})
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return 0, err
	}
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		if err := start(id); err != nil {
			return 0, err
		}
	}
	for range 3 {
		select {
		case <-ready:
		case <-time.After(20 * time.Second):
			return 0, errors.New("the agents were not ready within 20 s")
		}
	}
	op := board.NewOperatorClient(nc)
	if err := waitReady(ctx, op); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := op.Apply(ctx, p); err != nil {
		return 0, err
	}
	deadline := time.After(5 * time.Minute)
	kill := time.After(killAfter)
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-deadline:
			return 0, errors.New("the plan was not done within 5 minutes")
		case <-kill:
			if c == none {
				continue
			}
			cmd := procs["agent-2"]
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			delete(procs, "agent-2")
			if c == restart {
				if err := start("agent-2"); err != nil {
					return 0, err
				}
			}
		case <-time.After(50 * time.Millisecond):
		}
		tasks, err := op.List(ctx, p.Plan)
		if err != nil {
			continue
		}
		done := 0
		for _, t := range tasks {
			switch t.Status {
			case protocol.BoardDone:
				done++
			case protocol.BoardFailed, protocol.BoardCancelled:
				return 0, fmt.Errorf("task %s %s: %s", t.Key(), t.Status, t.Reason)
			}
		}
		if done == len(p.Tasks) {
			return time.Since(t0), nil
		}
	}
}

// waitReady waits until the board answers (the services are up).
func waitReady(ctx context.Context, op *board.Client) error {
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := op.List(ctx, ""); err == nil {
			return nil
		}
	}
	return errors.New("the board did not answer within 20 s")
}
