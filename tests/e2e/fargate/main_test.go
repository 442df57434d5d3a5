// Package fargate_test runs the aws stack as Fargate would run it, on a real
// Docker engine (tests/fargate): the stack is captured under the mock engine,
// its ECS services started by a replayed scheduler, and the flock is then
// driven the way an aws user drives it: the operator's task definition run
// as `aws ecs run-task` runs it. Set FLOCK_E2E_FARGATE=1 to run it (make
// e2e-fargate); with it set and no engine answering, it fails.
package fargate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/e2e/suite"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

const (
	flockName = "fgt"
	agents    = 3
	// The fake model API is on the replay's internet, under this name.
	modelHost   = "model.test"
	upstreamKey = "sk-ant-fargate-e2e-upstream-key"
	fakeAnswer  = "the aws flock answers through its gateway"
)

var (
	engine   *replay.Engine
	cluster  *fargate.Cluster
	stack    *capture.Stack
	work     string
	gate     suite.Gate
	started  time.Time     // when the first service was created
	upTime   time.Duration // from nothing to every task healthy
	usable   time.Duration // to the operator listing every agent ready
	operator fargate.Endpoint
	opFamily string
)

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m, suite.Spec{
		Name: "e2e fargate",
		On:   "FLOCK_E2E_FARGATE",
		Off:  "set FLOCK_E2E_FARGATE=1 (make e2e-fargate) to run the aws stack as Fargate would, on a real Docker engine",
		Gate: &gate,
		SetUp: func(ctx context.Context, e *replay.Engine) error {
			engine = e
			return setUp(ctx)
		},
		TearDown:        tearDown,
		TearDownTimeout: 3 * time.Minute,
	}))
}

// tearDown stops the cluster, removes the fake model and whatever else the
// replay left, and the work directory (unless FLOCK_E2E_KEEP is set).
func tearDown(ctx context.Context) (err error) {
	if cluster != nil {
		err = cluster.Down(ctx)
	}
	_ = engine.Remove(ctx, fakeModelName)
	_ = fargate.Clean(ctx, engine)
	if work != "" && os.Getenv("FLOCK_E2E_KEEP") == "" {
		os.RemoveAll(work)
	}
	return err
}

// Config is the aws stack the suite runs: Pulumi.aws.yaml with 3 agents
// (the three-node bus, its default on aws), a gateway whose one upstream is
// the fake model on the replay's internet, egress rules for agent-1 (one
// path of the fake model over plain HTTP, and a brokered host), heartbeats every 2 s, and images
// FROM scratch (no registry here).
func Config() capture.Config {
	return capture.Config{
		"flock:name":       flockName,
		"flock:agentCount": fmt.Sprint(agents),
		"flock:bus":        `{"heartbeatInterval": "2s"}`,
		"flock:aws":        `{"baseImage": "scratch", "cidr": "10.220.0.0/16", "availabilityZones": 2, "egress": "endpoints"}`,
		"flock:gateway": fmt.Sprintf(`{"upstreams": {"anthropic": {"url": "http://%s:9090"}}, "egress": [
			{"host": %[1]q, "port": 9090, "plainHttp": true, "paths": ["/_fake/seen"], "agents": ["agent-1"]},
			{"host": "registry.example.com", "agents": ["agent-1"]}]}`, modelHost),
		"flock:anthropicApiKey": upstreamKey,
	}
}

func setUp(ctx context.Context) (err error) {
	if work, err = os.MkdirTemp("", "flock-fargate-"); err != nil {
		return err
	}
	root, err := capture.ProjectRoot()
	if err != nil {
		return err
	}
	if err := capture.BuildImageContext(root); err != nil {
		return err
	}
	cfg, err := capture.StackConfig("aws")
	if err != nil {
		return err
	}
	for k, v := range Config() {
		cfg[k] = v
	}
	cfg, secrets := capture.WithSecret(cfg)
	if stack, err = capture.Run("aws", cfg, append(secrets, "flock:anthropicApiKey")...); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	model, err := fargate.Read(stack)
	if err != nil {
		return err
	}
	logf := func(string, ...any) {}
	if os.Getenv("FLOCK_E2E_VERBOSE") != "" {
		logf = func(format string, a ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", a...)
		}
	}
	if cluster, err = fargate.New(ctx, engine, model, fargate.Options{Root: root, Work: work, Log: logf}); err != nil {
		return err
	}
	if err := startFakeModel(ctx); err != nil {
		return fmt.Errorf("fake model: %w", err)
	}
	operator = fargate.Endpoint{Groups: []string{outputString("operatorSecurityGroup")}, Subnet: outputStrings("subnets")[0]}
	opFamily = familyOf(outputString("operatorTaskDefinition"))
	started = time.Now()
	if err := cluster.Up(ctx); err != nil {
		return err
	}
	if err := cluster.WaitHealthy(ctx, 5*time.Minute); err != nil {
		return err
	}
	upTime = time.Since(started)
	fmt.Fprintf(os.Stderr, "e2e fargate: %d services, every task healthy %s after the first was created\n", len(cluster.Services()), upTime.Round(time.Millisecond))
	return putInCommon(ctx, root)
}

func outputString(name string) string {
	s, _ := stack.Outputs[name].Value.(string)
	return s
}

func outputStrings(name string) []string {
	switch l := stack.Outputs[name].Value.(type) {
	case []string:
		return l
	case []any:
		var out []string
		for _, v := range l {
			s, _ := v.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// familyOf is a task definition's family, from its family or ARN.
func familyOf(s string) string {
	s = s[strings.LastIndex(s, "/")+1:]
	if i := strings.LastIndex(s, ":"); i > 0 {
		s = s[:i]
	}
	return s
}

func need(t *testing.T) {
	t.Helper()
	gate.Need(t)
}

// runOperator runs one operator command as `aws ecs run-task` does: the
// operator task definition, in the operator's group and a private subnet,
// its command overridden.
func runOperator(t *testing.T, args ...string) string {
	t.Helper()
	res, err := cluster.RunTask(context.Background(), opFamily, operator, map[string][]string{"operator": args}, 3*time.Minute)
	if err != nil {
		t.Fatalf("run-task %v: %v", args, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run-task %v: exit %d (%s):\n%s\n%s", args, res.ExitCode, res.Task.StopReason, res.Output, res.Task.Logs)
	}
	return res.Output
}

// runOperatorStatus is runOperator for a command whose task may fail (the
// operator's command then exits non-zero): its output whatever the exit.
func runOperatorStatus(t *testing.T, args ...string) string {
	t.Helper()
	res, err := cluster.RunTask(context.Background(), opFamily, operator, map[string][]string{"operator": args}, 3*time.Minute)
	if err != nil {
		t.Fatalf("run-task %v: %v", args, err)
	}
	return res.Output
}

// results are the JSON results an operator command printed (--json).
func results(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rs []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["task_id"] != nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// putInCommon puts the test's programs in common as the operator would
// (through its read-write access point: owned by the operator's UID,
// world-readable): the probe and the example AI agent.
func putInCommon(ctx context.Context, root string) error {
	// Run the operator until it lists every agent: its access point creates
	// common. A three-node bus becomes healthy before it is one cluster (a
	// node alone is healthy after its bootstrap grace, so that Cloud Map,
	// which names only healthy tasks, lets the nodes find each other); the
	// streams exist a few seconds after they found each other.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res, err := cluster.RunTask(ctx, opFamily, operator, map[string][]string{"operator": {"agents"}}, 3*time.Minute)
		if err != nil {
			return err
		}
		if res.ExitCode == 0 && strings.Count(res.Output, "ready") >= agents {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("operator task `agents`: exit %d (%s):\n%s", res.ExitCode, res.Task.StopReason, res.Output)
		}
		time.Sleep(2 * time.Second)
	}
	usable = time.Since(started)
	fmt.Fprintf(os.Stderr, "e2e fargate: the operator lists every agent ready %s after the first service was created\n", usable.Round(time.Millisecond))
	common, uid, err := commonDir()
	if err != nil {
		return err
	}
	bin := filepath.Join(common, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	for name, pkg := range map[string]string{"probe": "./tests/e2e/probe", "ai-agent": "./examples/ai-agent"} {
		if err := capture.GoBuild(root, filepath.Join(bin, name), pkg); err != nil {
			return err
		}
		if err := os.Chown(filepath.Join(bin, name), uid, uid); err != nil {
			return err
		}
	}
	return os.Chown(bin, uid, uid)
}

// commonDir is common on the replay's file system, and its owner.
func commonDir() (string, int, error) {
	for _, ap := range cluster.Model().AccessPoints {
		if ap.Path == awsflock.EFSCommonDir && ap.UID != awsflock.NobodyUID {
			return filepath.Join(work, "efs", ap.FileSystemID, ap.Path), ap.OwnerUID, nil
		}
	}
	return "", 0, fmt.Errorf("no access point opens common read-write")
}
