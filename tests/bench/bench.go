// Package bench measures the agent: task throughput and publish-to-result
// latency against a real bus, the time from process start to the first
// heartbeat, idle RSS, and the image size. The Go benchmarks
// (go test -bench . ./tests/bench) and the table command
// (go run ./tests/bench/flock-bench) both use it.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/worker"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/bustest"
)

// Load is one throughput run.
type Load struct {
	Agents      int
	Concurrency int    // per agent (flock:limits.concurrency); 2 is the default
	Pool        bool   // publish on tasks.pool instead of tasks.<id> round robin
	Exec        string // if set, run this binary ("<it> tool exit 0") instead of the built-in echo
	Tasks       int    // how many tasks
	Window      int    // tasks in flight at once (closed loop); default 2 x agents x concurrency
	NoMetrics   bool   // the services run without their exporter
	NoAudit     bool   // the services run without their audit writer
}

// Name describes l for a table row.
func (l Load) Name() string {
	kind, route := "echo (no process)", "tasks.<id>"
	if l.Exec != "" {
		kind = "exec (spawns a process)"
	}
	if l.Pool {
		route = "tasks.pool"
	}
	return fmt.Sprintf("%s, %d agent(s) x %d slots, %s", kind, l.Agents, l.Concurrency, route)
}

// Stats is what a throughput run measured.
type Stats struct {
	Tasks    int
	Elapsed  time.Duration
	PerSec   float64
	P50, P99 time.Duration
	Max      time.Duration
}

// Throughput starts a bus and l.Agents agents in this process, keeps
// l.Window tasks in flight (a new one is published as each result arrives),
// and measures tasks per second and the latency from publish to result.
func Throughput(ctx context.Context, l Load) (Stats, error) {
	if l.Concurrency <= 0 {
		l.Concurrency = 2
	}
	if l.Window <= 0 {
		l.Window = 2 * l.Agents * l.Concurrency
	}
	dir, err := os.MkdirTemp("", "flock-bench-")
	if err != nil {
		return Stats{}, err
	}
	defer os.RemoveAll(dir)
	cfg, opts := l.Bus()
	f, err := bustest.New(dir, cfg, nil, opts...)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	return ThroughputOn(ctx, f, dir, l)
}

// Bus is the flock configuration and test-bus options of l's flock.
func (l Load) Bus() (flock.Config, []bustest.Option) {
	if l.Concurrency <= 0 {
		l.Concurrency = 2
	}
	cfg := bustest.Agents(l.Agents)
	cfg.Limits.Concurrency = &l.Concurrency
	var opts []bustest.Option
	if l.NoMetrics {
		opts = append(opts, bustest.WithoutMetrics())
	}
	if l.NoAudit {
		opts = append(opts, bustest.WithoutAudit())
	}
	return cfg, opts
}

// ThroughputOn is Throughput on a bus already started from l.Bus() (a
// three-node one, say), its agents' directories under dir.
func ThroughputOn(ctx context.Context, f *bustest.Bus, dir string, l Load) (Stats, error) {
	if l.Concurrency <= 0 {
		l.Concurrency = 2
	}
	if l.Window <= 0 {
		l.Window = 2 * l.Agents * l.Concurrency
	}
	op, err := f.DialUser(protocol.OperatorUser)
	if err != nil {
		return Stats{}, err
	}
	defer op.Close()
	stop, err := startAgents(ctx, f, dir, l.Agents)
	if err != nil {
		return Stats{}, err
	}
	defer stop()

	js, err := jetstream.New(op, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return Stats{}, err
	}
	var mu sync.Mutex
	sent := map[string]time.Time{}
	lat := make([]time.Duration, 0, l.Tasks)
	done := make(chan struct{})
	slots := make(chan struct{}, l.Window)
	var failures int
	sub, err := op.Subscribe(protocol.SubjectResults, func(m *nats.Msg) {
		var r protocol.Result
		if json.Unmarshal(m.Data, &r) != nil {
			return
		}
		now := time.Now()
		mu.Lock()
		t0, ok := sent[r.TaskID]
		if ok {
			delete(sent, r.TaskID)
			lat = append(lat, now.Sub(t0))
			if !r.OK() {
				failures++
			}
			if len(lat) == l.Tasks {
				close(done)
			}
		}
		mu.Unlock()
		if ok {
			<-slots
		}
	})
	if err != nil {
		return Stats{}, err
	}
	defer sub.Unsubscribe()
	_ = op.Flush()

	ids := f.Model.AgentIDs()
	body := func(i int) (string, []byte) {
		id := "b" + strconv.Itoa(i)
		t := protocol.Task{V: 1, ID: id, Kind: protocol.KindEcho, Stdin: "ping"}
		if l.Exec != "" {
			t = protocol.Task{V: 1, ID: id, Kind: protocol.KindExec, Command: l.Exec, Args: []string{"tool", "exit", "0"}}
		}
		b, _ := json.Marshal(t)
		return id, b
	}
	start := time.Now()
	for i := range l.Tasks {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return Stats{}, ctx.Err()
		}
		subject := protocol.TaskSubject(ids[i%len(ids)])
		if l.Pool {
			subject = protocol.SubjectTasksPool
		}
		id, b := body(i)
		mu.Lock()
		sent[id] = time.Now()
		mu.Unlock()
		if _, err := js.PublishAsync(subject, b); err != nil {
			return Stats{}, err
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		return Stats{}, fmt.Errorf("%d of %d results: %w", n, l.Tasks, ctx.Err())
	}
	elapsed := time.Since(start)
	if failures > 0 {
		return Stats{}, fmt.Errorf("%d tasks failed", failures)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	return Stats{Tasks: l.Tasks, Elapsed: elapsed, PerSec: float64(l.Tasks) / elapsed.Seconds(), P50: q(0.50), P99: q(0.99), Max: lat[len(lat)-1]}, nil
}

// startAgents runs every agent of f in this process and waits until all are ready.
func startAgents(ctx context.Context, f *bustest.Bus, dir string, n int) (stop func(), err error) {
	op, err := f.DialUser(protocol.OperatorUser)
	if err != nil {
		return nil, err
	}
	defer op.Close()
	ready := make(chan string, n)
	sub, err := op.Subscribe(protocol.SubjectEvents, func(m *nats.Msg) {
		var e protocol.Event
		if json.Unmarshal(m.Data, &e) == nil && e.Type == protocol.EventReady {
			ready <- e.Agent
		}
	})
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	_ = op.Flush()
	actx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, a := range f.Model.Agents {
		seed, err := f.WriteSeed(a.ID)
		if err != nil {
			cancel()
			return nil, err
		}
		cfg := worker.Config{
			ID: a.ID, URL: f.URL, SharedDir: filepath.Join(dir, "shared"), NkeyFile: seed,
			Concurrency: a.Limits.Concurrency, LogFile: "-", LogLevel: "error", Grace: time.Second,
			StatusFile: filepath.Join(dir, "run", a.ID+".status"),
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = worker.Run(actx, cfg, slog.New(slog.DiscardHandler)) }()
	}
	stop = func() { cancel(); wg.Wait() }
	for range n {
		select {
		case <-ready:
		case <-time.After(20 * time.Second):
			stop()
			return nil, errors.New("agents not ready after 20 s")
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
	}
	return stop, nil
}

// Startup runs the agent binary as its own process against a fresh bus, runs
// times, and measures the time from process start to its first heartbeat and
// its resident memory after idle seconds with no work.
func Startup(ctx context.Context, agentBin string, runs int, idle time.Duration) (firstHB []time.Duration, rssKiB []int64, err error) {
	dir, err := os.MkdirTemp("", "flock-bench-start-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	f, err := bustest.New(dir, bustest.Agents(1), nil)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	op, err := f.DialUser(protocol.OperatorUser)
	if err != nil {
		return nil, nil, err
	}
	defer op.Close()
	seed, err := f.WriteSeed("agent-1")
	if err != nil {
		return nil, nil, err
	}
	hb := make(chan time.Time, 64)
	sub, err := op.Subscribe(protocol.HeartbeatSubject("agent-1"), func(*nats.Msg) { hb <- time.Now() })
	if err != nil {
		return nil, nil, err
	}
	defer sub.Unsubscribe()
	_ = op.Flush()
	for range runs {
		for len(hb) > 0 {
			<-hb
		}
		cmd := exec.Command(agentBin)
		cmd.Env = []string{
			"AGENT_ID=agent-1", "NATS_URL=" + f.URL, "SHARED_DIR=" + filepath.Join(dir, "shared"),
			"NATS_NKEY_FILE=" + seed, "LOG_FILE=-", "LOG_LEVEL=warn", "STATUS_FILE=" + filepath.Join(dir, "status"),
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		select {
		case t := <-hb:
			firstHB = append(firstHB, t.Sub(t0))
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, nil, errors.New("no heartbeat within 10 s")
		}
		select {
		case <-time.After(idle):
		case <-ctx.Done():
		}
		rss, err := RSS(cmd.Process.Pid)
		if err == nil {
			rssKiB = append(rssKiB, rss)
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
	return firstHB, rssKiB, nil
}

// RSS is a process's resident set in KiB, from /proc/<pid>/status.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// ModuleRoot is the directory of the go.mod this package belongs to.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the module")
	}
	return filepath.Dir(gomod), nil
}

// Build builds a static binary of pkg (e.g. "./agent/cmd/flock-agent") into
// out the way the Dockerfile expects it.
func Build(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// ImageSize builds the agent image FROM scratch with Docker (binaries must
// be in <root>/agent/bin, as make bin puts them) and returns its size in bytes.
func ImageSize(ctx context.Context, root, target string) (int64, error) {
	tag := "flock-" + target + ":bench"
	build := exec.CommandContext(ctx, "docker", "build", "-q", "--build-arg", "BASE=scratch", "--target", target, "-t", tag, filepath.Join(root, "agent"))
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if b, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("docker build: %v: %s", err, strings.TrimSpace(string(b)))
	}
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "-f", "{{.Size}}", tag).Output()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// Median of ds.
func Median[T int64 | time.Duration](ds []T) T {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
