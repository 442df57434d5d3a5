// Package e2e proves the isolation and the function of the dev flock on a
// real Docker engine. It captures the dev stack under the mock engine,
// replays it onto the engine (tests/e2e/replay), then probes it from inside
// the containers. Set FLOCK_E2E=1 to run it; with FLOCK_REQUIRE_DOCKER=1 a
// missing engine fails the suite instead of skipping it.
//
// FLOCK_E2E_RUNTIME=runsc runs the flock under gVisor (flock:runtime), the
// engine having a runtime of that name registered (tests/setup.sh does it),
// and only the probes that must hold there (gvisor_test.go). Without runsc
// on the engine the suite skips; with FLOCK_REQUIRE_GVISOR=1 it fails.
//
// FLOCK_E2E_TARGET=pulumi runs the same probes against a flock deployed by a
// real `pulumi up -s dev` instead of a replay (see the README).
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/agent/operator"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/e2e/suite"
)

// The flock under test.
type flockUnderTest struct {
	name       string   // container name prefix
	sharedRoot string   // host path of the shared directory
	agents     []string // agent IDs
	uids       map[string]int
	seed       string // operator nkey seed
	busURL     string
	probe      map[string]string // agent ID -> probe path inside its container
	engine     *replay.Engine
	replayed   *replay.Deployment
	stack      *capture.Stack // what the replay created, as declared
	stateRoot  string         // host path of the credentials and the bus's files
	heartbeat  time.Duration  // the agents' heartbeat interval
	startTime  time.Duration  // replay start to every agent's first heartbeat
}

var (
	fut     *flockUnderTest
	skipWhy string
	root    string
)

const agentCount = 10

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	if os.Getenv("FLOCK_E2E") != "1" {
		skipWhy = "set FLOCK_E2E=1 to run the e2e suite on a real Docker engine"
		return m.Run()
	}
	var err error
	if root, err = capture.ProjectRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel, engine, err := suite.Open()
	defer cancel()
	if err != nil {
		if os.Getenv("FLOCK_REQUIRE_DOCKER") == "1" {
			fmt.Fprintf(os.Stderr, "e2e: FLOCK_REQUIRE_DOCKER=1 but %v\n", err)
			return 1
		}
		skipWhy = err.Error()
		return m.Run()
	}
	if underGVisor() {
		if why := gvisorMissing(ctx, engine); why != "" {
			if os.Getenv("FLOCK_REQUIRE_GVISOR") == "1" {
				fmt.Fprintf(os.Stderr, "e2e: FLOCK_E2E_RUNTIME=runsc and FLOCK_REQUIRE_GVISOR=1 but %s\n", why)
				return 1
			}
			skipWhy = "FLOCK_E2E_RUNTIME=runsc but " + why
			return m.Run()
		}
	}
	if os.Getenv("FLOCK_E2E_TARGET") == "pulumi" {
		fut, err = attachDeployed(ctx, engine)
	} else {
		fut, err = setUp(ctx, engine)
		// Tear down whatever happens, including an interrupt.
		defer func() {
			if os.Getenv("FLOCK_E2E_KEEP") == "1" {
				fmt.Fprintln(os.Stderr, "e2e: FLOCK_E2E_KEEP=1: leaving the flock running (the next run removes it)")
				return
			}
			tctx, tcancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer tcancel()
			if fut != nil && fut.replayed != nil {
				if err := fut.stopFakeModel(tctx); err != nil {
					fmt.Fprintln(os.Stderr, "e2e teardown: the fake model:", err)
					code = 1
				}
				if err := fut.stopGitRemote(tctx); err != nil {
					fmt.Fprintln(os.Stderr, "e2e teardown: the git remote:", err)
					code = 1
				}
				if err := fut.replayed.Teardown(tctx); err != nil {
					fmt.Fprintln(os.Stderr, "e2e teardown:", err)
					code = 1
				}
				if err := fut.removeInternet(tctx); err != nil {
					fmt.Fprintln(os.Stderr, "e2e teardown: the internet network:", err)
					code = 1
				}
				// pulumi destroy takes every credential off the host (the agents'
				// prepare steps delete their keys): so must the replay of it.
				if left, _ := filepath.Glob(filepath.Join(fut.stateRoot, "creds", "*")); len(left) > 0 {
					fmt.Fprintf(os.Stderr, "e2e teardown: credentials left on the host: %v\n", left)
					code = 1
				}
			} else {
				replay.Clean(tctx, engine)
			}
		}()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}
	// The control image some probes build is the suite's own: it leaves
	// the engine as it found it, in replay and against a deployed flock alike.
	defer func() {
		if controlImg == "" {
			return
		}
		ictx, icancel := context.WithTimeout(context.Background(), time.Minute)
		defer icancel()
		if err := engine.RemoveImage(ictx, controlImg); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: removing the control image:", err)
			code = 1
		}
	}()
	done := make(chan int, 1)
	go func() { done <- m.Run() }()
	select {
	case code := <-done:
		return code
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "e2e: interrupted; tearing down")
		return 1
	}
}

func logf(format string, args ...any) {
	if os.Getenv("FLOCK_E2E_VERBOSE") == "1" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// hostPortsFree checks the loopback ports the test flock's bus publishes
// before anything is made: a flock deployed on this machine (make deploy,
// layer 3) holds them, and the replay would fail half-way with the engine's
// "port is already allocated".
func hostPortsFree() error {
	for _, port := range []int{protocol.ClientPort, protocol.MonitorPort, protocol.MetricsPort} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("127.0.0.1:%d is taken (%v): another flock is running on this machine (make destroy, or wait for layer 3 to end) or another program holds the port; the test flock's bus publishes 4222, 8222 and 9464 on loopback", port, err)
		}
		_ = l.Close()
	}
	return nil
}

// setUp builds the binaries, captures the dev stack for a test flock and
// replays it onto the engine.
func setUp(ctx context.Context, engine *replay.Engine) (*flockUnderTest, error) {
	if err := replay.Clean(ctx, engine); err != nil {
		return nil, fmt.Errorf("removing leftovers of an earlier run: %w", err)
	}
	if err := hostPortsFree(); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "flock-e2e-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return nil, err
	}
	if err := capture.BuildImageContext(root); err != nil {
		return nil, err
	}
	probeBin := filepath.Join(work, "probe")
	if err := goBuild(probeBin, "./tests/e2e/probe"); err != nil {
		return nil, err
	}
	shared := filepath.Join(work, "shared")
	// agent-6's own image starts from a Debian root with Python, made offline.
	if out, err := exec.CommandContext(ctx, "bash", filepath.Join(root, "tests", "images", "debian-python.sh")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the Python base image: %v\n%s", err, out)
	}
	// The example AI agent is agent-4's program: it is in common before the
	// flock starts (a program that is missing would be retried with a backoff).
	if err := goBuild(filepath.Join(shared, "common", "bin", "ai-agent"), "./examples/ai-agent"); err != nil {
		return nil, err
	}
	stack, err := capture.RunDev(capture.Config{
		"flock:runtime":    os.Getenv("FLOCK_E2E_RUNTIME"),
		"flock:name":       "e2e",
		"flock:agentCount": "",
		"flock:agents":     e2eAgents(),
		"flock:gateway":    e2eGateway,
		"flock:otlp":       `{"endpoint": "http://` + fakeModelAddr + `"}`,
		gatewayKeyConfig:   e2eKey,
		openaiKeyConfig:    e2eKey,
		gitTokenConfig:     gitToken,
		"flock:shared":     fmt.Sprintf(`{"root": %q, "stateRoot": %q}`, shared, filepath.Join(work, "state")),
		"flock:network":    `{"pool": "10.211.0.0/16", "prefixLength": 29}`,
		"flock:limits":     `{"cpus": 0.5, "memoryMiB": 128, "pids": 64, "tmpfsMiB": 16, "taskTimeout": "60s", "concurrency": 2, "diskMiB": 64}`,
		"flock:bus":        `{"heartbeatInterval": "2s", "ackWait": "5s", "maxDeliver": 4, "resultsMiBPerAgent": 8}`,
		"flock:docker":     `{"baseImage": "scratch"}`,
		"flock:board":      fmt.Sprintf(`{"addQuota": %d, "lease": %q}`, boardAddQuota, boardLease.String()),
		// The smallest trail, so that a flood reaches an agent's share of it
		// within TestHostileAuditFlood.
		"flock:audit": `{"maxMiB": 16}`,
	}, gatewayKeyConfig, openaiKeyConfig, gitTokenConfig)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	op, err := credentials.Derive([]byte(capture.TestSecret), protocol.OperatorUser)
	if err != nil {
		return nil, err
	}
	f := &flockUnderTest{name: "e2e", sharedRoot: shared, uids: map[string]int{}, seed: op.Seed, busURL: "nats://127.0.0.1:4222", engine: engine, probe: map[string]string{}, stack: stack, stateRoot: filepath.Join(work, "state"), heartbeat: 2 * time.Second}
	for i := 1; i <= agentCount; i++ {
		id := fmt.Sprintf("agent-%d", i)
		f.agents = append(f.agents, id)
		f.uids[id] = 20000 + i
	}

	// Listen for heartbeats before the flock exists, to time its start.
	start := time.Now()
	f.replayed, err = replay.Replay(ctx, engine, stack, root, logf)
	if err != nil {
		return f, err
	}
	// The fake model the gateway calls, on the egress network.
	if err := f.startFakeModel(ctx, work); err != nil {
		return f, fmt.Errorf("fake model: %w", err)
	}
	// The git remote on "the internet", for the egress tests.
	if err := f.startGitRemote(ctx, work); err != nil {
		return f, fmt.Errorf("git remote: %w", err)
	}
	if err := f.waitForHeartbeats(ctx, 90*time.Second); err != nil {
		return f, err
	}
	// Here only: the fault tests wait for heartbeats again after restarts.
	f.startTime = time.Since(start)
	// Put the probe into each agent's own directory: the root filesystem is
	// read-only, so the containers stay exactly as declared.
	// agent-3: the gateway budget probe; agent-7 to agent-10, whose trail
	// shares no later test reads: the mail that fills a mailbox
	// (TestHostileMail).
	probed := slices.Clone(f.agents[:min(3, len(f.agents))]) // a copy: appending must not write into f.agents
	if len(f.agents) >= 10 {
		probed = append(probed, f.agents[6:10]...)
	}
	for _, id := range probed {
		if err := f.installProbe(probeBin, id); err != nil {
			return f, err
		}
	}
	return f, nil
}

func goBuild(out, pkg string) error { return capture.GoBuild(root, out, pkg) }

// installProbe copies the probe binary into the agent's own directory, owned
// by the agent, plus a setuid-root copy that no-new-privileges must defang.
func (f *flockUnderTest) installProbe(bin, id string) error {
	dir := filepath.Join(f.sharedRoot, "agents", id, ".probe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		uid  int
		mode os.FileMode
	}{{"probe", f.uids[id], 0o755}, {"probe-suid", 0, 0o755 | os.ModeSetuid}} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, raw, 0o755); err != nil {
			return err
		}
		if err := os.Chown(p, c.uid, c.uid); err != nil {
			return err
		}
		if err := os.Chmod(p, c.mode); err != nil {
			return err
		}
	}
	if err := os.Chown(dir, f.uids[id], f.uids[id]); err != nil {
		return err
	}
	f.probe[id] = "/shared/agents/" + id + "/.probe/probe"
	return nil
}

// waitForHeartbeats waits until every agent has sent a heartbeat in state ready.
func (f *flockUnderTest) waitForHeartbeats(ctx context.Context, timeout time.Duration) error {
	return suite.WaitReady(func() (*nats.Conn, error) { return f.connect() }, len(f.agents), timeout)
}

// connect opens an operator connection to the bus.
func (f *flockUnderTest) connect(opts ...nats.Option) (*nats.Conn, error) {
	kp, err := nkeyOption(f.seed)
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{kp, nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.OperatorInboxToken)), nats.Name("e2e-operator")}, opts...)
	return nats.Connect(f.busURL, opts...)
}

func need(t *testing.T) *flockUnderTest {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	if fut == nil {
		t.Fatal("the flock under test was not set up")
	}
	return fut
}

// needTwo is need and the flock's first two agents: agent-1, the one a
// test attacks or loads, and agent-2, which must work on meanwhile.
func needTwo(t *testing.T) (f *flockUnderTest, a1, a2 string) {
	t.Helper()
	f = need(t)
	return f, f.agents[0], f.agents[1]
}

// needReplay is need for a test that runs only on a replayed flock, not
// against one deployed by pulumi (FLOCK_E2E_TARGET=pulumi): it skips
// there, saying why.
func needReplay(t *testing.T, why string) *flockUnderTest {
	t.Helper()
	f := need(t)
	if f.replayed == nil {
		t.Skip(why)
	}
	return f
}

func container(id string) string { return fut.name + "-" + id }

// probe runs the probe binary in an agent container and returns its outcome.
func probe(t *testing.T, agent string, args ...string) replay.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := fut.engine.Exec(ctx, container(agent), append([]string{fut.probe[agent]}, args...), "AGENT_ID="+agent)
	if err != nil {
		t.Fatalf("probe %v in %s: %v", args, agent, err)
	}
	return res
}

// mustFail asserts a probe's action failed (exit 1) and returns its output.
func mustFail(t *testing.T, agent string, args ...string) string {
	t.Helper()
	return probeExits(t, 1, "the action refused (1)", agent, args...)
}

// mustSucceed asserts a probe's action succeeded.
func mustSucceed(t *testing.T, agent string, args ...string) string {
	t.Helper()
	return probeExits(t, 0, "success", agent, args...)
}

// probeExits asserts a probe's action ended with exit code want (which
// means what wants says) and returns its output.
func probeExits(t *testing.T, want int, wants, agent string, args ...string) string {
	t.Helper()
	res := probe(t, agent, args...)
	if res.ExitCode != want {
		t.Errorf("%s: probe %v: exit %d, want %s; output %q %q", agent, args, res.ExitCode, wants, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// inspect returns a container's inspect document.
func inspect(t *testing.T, name string) map[string]any {
	t.Helper()
	doc, err := fut.engine.Inspect(context.Background(), name)
	if err != nil {
		t.Fatalf("inspect %s: %v", name, err)
	}
	return doc
}

// ipOn returns a container's address on a network.
func ipOn(t *testing.T, name, network string) string {
	t.Helper()
	nets := inspect(t, name)["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)
	n, ok := nets[network].(map[string]any)
	if !ok {
		t.Fatalf("%s is not on %s", name, network)
	}
	return n["IPAddress"].(string)
}

// jsClient returns a JetStream client on an operator connection.
func jsClient(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	// A bus reloading its users (SIGHUP) can refuse a new connection for a
	// moment, the operator's too (seen in CI right after a key rotation);
	// a refusal that lasts fails the test.
	nc, err := fut.connect()
	for deadline := time.Now().Add(15 * time.Second); err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		nc, err = fut.connect()
	}
	if err != nil {
		t.Fatalf("operator connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// results reads the results the bus stores (each agent's results stream)
// since it was created, as an operator should: a core subscription would
// miss results published while the operator's own connection is
// reconnecting (a bus restart).
type results struct {
	cl    *operator.Client
	since time.Time
}

// operatorOn is an operator client on nc.
func operatorOn(t *testing.T, nc *nats.Conn) *operator.Client {
	t.Helper()
	cl, err := operator.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// jsResults is jsClient and a watcher of the results stored from now on.
func jsResults(t *testing.T) (*nats.Conn, jetstream.JetStream, *results) {
	t.Helper()
	nc, js := jsClient(t)
	return nc, js, watchResults(t, nc)
}

func watchResults(t *testing.T, nc *nats.Conn) *results {
	t.Helper()
	return &results{cl: operatorOn(t, nc), since: time.Now().Add(-time.Second)}
}

// read returns every result stored since the watcher was made, by task ID.
func (r *results) read(t *testing.T) (map[string][]protocol.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := r.cl.StoredResults(ctx, r.since)
	if err != nil {
		return nil, err
	}
	got := map[string][]protocol.Result{}
	for _, res := range rs {
		got[res.TaskID] = append(got[res.TaskID], res)
	}
	return got, nil
}

// collect re-reads the stored results until enough says it has them, or
// fails at timeout.
func (r *results) collect(t *testing.T, timeout time.Duration, enough func(map[string][]protocol.Result) bool) map[string][]protocol.Result {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got map[string][]protocol.Result
	var err error
	for time.Now().Before(deadline) {
		if got, err = r.read(t); err == nil && enough(got) {
			return got
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("waiting for results: timed out (results for %d tasks; last error %v)", len(got), err)
	return nil
}

// publish sends a task through JetStream and checks the bus stored it.
func publish(t *testing.T, js jetstream.JetStream, subject string, task protocol.Task) {
	t.Helper()
	if err := tryPublish(js, subject, task); err != nil {
		t.Fatalf("publish %s to %s: %v", task.ID, subject, err)
	}
}

var unsafeID = regexp.MustCompile(`[^a-z0-9._-]+`)

// taskID makes a task ID from the test's name (task IDs name directories).
func taskID(t *testing.T, tag string) string {
	name := unsafeID.ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("%s-%s-%d", name, tag, time.Now().UnixNano())
}
