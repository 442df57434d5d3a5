// Package cluster proves on a real Docker engine that the dev flock's
// three-node bus (flock:bus.replicas 3) survives losing a node: the dev
// stack is captured under the mock engine and replayed onto the engine, as
// in tests/e2e, then bus containers are stopped and started under a flow of
// tasks. Set FLOCK_E2E_CLUSTER=1 to run it (make e2e-cluster); it must not
// run beside tests/e2e, which uses the same host ports.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/e2e/suite"
)

const (
	flockName = "e2ec"
	agents    = 3
	pool      = "10.212.0.0/16"
)

var (
	engine   *replay.Engine
	replayed *replay.Deployment
	shared   string
	seed     string
	gate     suite.Gate
	// The operator is given every node, as `pulumi stack output busUrl` says.
	busURL = "nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"
)

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m, suite.Spec{
		Name: "e2e cluster",
		On:   "FLOCK_E2E_CLUSTER",
		Off:  "set FLOCK_E2E_CLUSTER=1 (make e2e-cluster) to run the three-node bus on a real Docker engine",
		Gate: &gate,
		SetUp: func(ctx context.Context, e *replay.Engine) error {
			engine = e
			return setUp(ctx)
		},
		TearDown:        tearDown,
		TearDownTimeout: 2 * time.Minute,
	}))
}

// tearDown removes the replayed flock, or whatever a failed set-up left.
func tearDown(ctx context.Context) error {
	if replayed != nil {
		return replayed.Teardown(ctx)
	}
	_ = replay.Clean(ctx, engine)
	return nil
}

func setUp(ctx context.Context) error {
	root, err := capture.ProjectRoot()
	if err != nil {
		return err
	}
	if err := replay.Clean(ctx, engine); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "flock-e2e-cluster-")
	if err != nil {
		return err
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	if err := capture.BuildImageContext(root); err != nil {
		return err
	}
	probeBin := filepath.Join(work, "probe")
	if err := capture.GoBuild(root, probeBin, "./tests/e2e/probe"); err != nil {
		return err
	}
	shared = filepath.Join(work, "shared")
	stack, err := capture.RunDev(capture.Config{
		"flock:name":       flockName,
		"flock:agentCount": fmt.Sprint(agents),
		"flock:shared":     fmt.Sprintf(`{"root": %q, "stateRoot": %q}`, shared, filepath.Join(work, "state")),
		"flock:network":    fmt.Sprintf(`{"pool": %q, "prefixLength": 29}`, pool),
		"flock:limits":     `{"cpus": 0.5, "memoryMiB": 128, "pids": 64, "tmpfsMiB": 16, "taskTimeout": "60s", "concurrency": 2, "diskMiB": 64}`,
		"flock:bus":        `{"replicas": 3, "heartbeatInterval": "1s", "ackWait": "5s", "maxDeliver": 10, "resultsMiBPerAgent": 8}`,
		"flock:docker":     `{"baseImage": "scratch"}`,
		// Every agent also runs an agent program: the image's own binary
		// printing its environment (TestAgentProgramRunsInTheContainer).
		"flock:program": `["/flock-agent", "tool", "env"]`,
	})
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	op, err := credentials.Derive([]byte(capture.TestSecret), protocol.OperatorUser)
	if err != nil {
		return err
	}
	seed = op.Seed
	if replayed, err = replay.Replay(ctx, engine, stack, root, func(string, ...any) {}); err != nil {
		return err
	}
	if err := installProbe(probeBin, "agent-1", 20001); err != nil {
		return err
	}
	return waitHeartbeats(90 * time.Second)
}

// installProbe puts the probe binary into the agent's own directory.
func installProbe(bin, id string, uid int) error {
	dir := filepath.Join(shared, "agents", id, ".probe")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, raw, 0o755); err != nil {
		return err
	}
	if err := os.Chown(p, uid, uid); err != nil {
		return err
	}
	return os.Chown(dir, uid, uid)
}

func need(t *testing.T) {
	t.Helper()
	gate.Need(t)
}

// connect opens an operator connection that fails over between the nodes.
func connect(opts ...nats.Option) (*nats.Conn, error) {
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	opts = append([]nats.Option{
		nats.Nkey(pub, kp.Sign),
		nats.CustomInboxPrefix(protocol.InboxPrefix(protocol.OperatorInboxToken)),
		nats.Name("e2e-cluster-operator"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
	}, opts...)
	return nats.Connect(busURL, opts...)
}

// waitHeartbeats waits until every agent has sent a heartbeat in state ready.
func waitHeartbeats(timeout time.Duration) error {
	return suite.WaitReady(func() (*nats.Conn, error) { return connect() }, agents, timeout)
}

func node(n int) string { return fmt.Sprintf("%s-bus-%d", flockName, n) }

// waitHealthy waits until the engine reports bus node n healthy (its
// health check is `flock-bus health`: the node is current with the cluster).
func waitHealthy(t *testing.T, n int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		doc, err := engine.Inspect(ctx, node(n))
		cancel()
		status := ""
		if err == nil {
			state, _ := doc["State"].(map[string]any)
			health, _ := state["Health"].(map[string]any)
			status, _ = health["Status"].(string)
		}
		if status == "healthy" {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s not healthy after %s (status %q, err %v)", node(n), d, status, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func stopNode(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := engine.Stop(ctx, node(n), 30); err != nil {
		t.Fatalf("stop %s: %v", node(n), err)
	}
}

func startNode(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ae *replay.APIError
	if err := engine.Start(ctx, node(n)); err != nil && !(errors.As(err, &ae) && ae.Status == 304) { // 304: it runs
		t.Fatalf("start %s: %v", node(n), err)
	}
}

// killNode kills node n at once (SIGKILL: no goodbye to its routes or clients).
func killNode(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := engine.Kill(ctx, node(n), "KILL"); err != nil {
		t.Fatalf("kill %s: %v", node(n), err)
	}
}
