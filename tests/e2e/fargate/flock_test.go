package fargate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
	"github.com/ai-flock/ai-flock/tests/fargate"
)

const fakeModelName = "fargate-e2e-fake-model"

// startFakeModel runs the fake model API on the replay's internet (only a
// task with a route out reaches it) as model.test:9090.
func startFakeModel(ctx context.Context) error {
	dir := filepath.Join(work, "fake-model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := capture.ProjectRoot()
	if err != nil {
		return err
	}
	if err := capture.GoBuild(root, filepath.Join(dir, "fake-model"), "./tests/fakemodel/cmd/fake-model"); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY fake-model /fake-model\nENTRYPOINT [\"/fake-model\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	img, err := engine.Build(ctx, dir, "Dockerfile", "", "ai-flock/fargate-fake-model:latest", nil, map[string]string{fargate.Label: "1", replay.RunLabel: "1"})
	if err != nil {
		return err
	}
	id, err := engine.CreateContainer(ctx, fakeModelName, map[string]any{
		"Image": img, "User": "65534:65534",
		"Env":    []string{"FAKE_MODEL_ADDR=:9090", "FAKE_MODEL_KEY=" + upstreamKey, "FAKE_MODEL_ANSWER=" + fakeAnswer},
		"Labels": map[string]string{fargate.Label: "1", replay.RunLabel: "1"},
		"HostConfig": map[string]any{"NetworkMode": cluster.Internet(), "ReadonlyRootfs": true, "CapDrop": []string{"ALL"},
			"Memory": 64 << 20},
		"NetworkingConfig": map[string]any{"EndpointsConfig": map[string]any{
			cluster.Internet(): map[string]any{"Aliases": []string{modelHost}},
		}},
	})
	if err != nil {
		return err
	}
	return engine.Start(ctx, id)
}

// fakeModelAddr is the fake model's address on the replay's internet,
// which the host reaches (it is a routed bridge).
func fakeModelAddr(t *testing.T) string {
	t.Helper()
	doc, err := engine.Inspect(context.Background(), fakeModelName)
	if err != nil {
		t.Fatal(err)
	}
	nets, _ := doc["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)
	ep, _ := nets[cluster.Internet()].(map[string]any)
	ip, _ := ep["IPAddress"].(string)
	if ip == "" {
		t.Fatal("the fake model has no address on the internet network")
	}
	return ip + ":9090"
}

// fakeSeen is what the fake model saw.
func fakeSeen(t *testing.T) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + fakeModelAddr(t) + "/_fake/seen")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The flock came up as Fargate would bring it up, in Pulumi's order: every
// bus node's service created only once the node before it was steady, every
// agent only once the bus was, and every task RUNNING and HEALTHY.
func TestFargateFlockComesUp(t *testing.T) {
	need(t)
	t.Logf("every task healthy %s after the first service was created", upTime.Round(time.Millisecond))
	first := func(name string) *fargate.Task {
		_, hist, ok := cluster.Service(name)
		if !ok || len(hist) == 0 {
			t.Fatalf("no task of service %s", name)
		}
		return hist[0]
	}
	bus := []string{flockName + "-bus-1", flockName + "-bus-2", flockName + "-bus-3"}
	for i := 1; i < len(bus); i++ {
		prev, next := first(bus[i-1]), first(bus[i])
		if next.Started.Before(prev.Running) {
			t.Errorf("%s started at %s, before %s was steady (RUNNING at %s)", bus[i], next.Started.Format(time.TimeOnly), bus[i-1], prev.Running.Format(time.TimeOnly))
		}
	}
	last := first(bus[len(bus)-1])
	for i := 1; i <= agents; i++ {
		a := first(fmt.Sprintf("%s-agent-%d", flockName, i))
		if a.Started.Before(last.Running) {
			t.Errorf("agent-%d started at %s, before the bus was steady (%s RUNNING at %s)", i, a.Started.Format(time.TimeOnly), bus[2], last.Running.Format(time.TimeOnly))
		}
	}
	for _, name := range cluster.Services() {
		cur, hist, _ := cluster.Service(name)
		if cur == nil || cur.State != fargate.StateRunning || cur.Health != fargate.HealthHealthy {
			t.Errorf("%s: %+v", name, cur)
		}
		if len(hist) != 1 {
			t.Errorf("%s ran %d tasks to come up, want 1 (the first stopped: %s)\n%s", name, len(hist), hist[0].StopReason, hist[0].Logs)
		}
	}
}

// Driven as an aws user drives it: the operator's task definition run with
// command overrides (aws ecs run-task). A task on every agent, a pool task,
// the agents listed with their heartbeats.
func TestFargateOperatorRunsTasks(t *testing.T) {
	need(t)
	out := runOperator(t, "task", "--all", "--json", "--", "/flock-agent", "tool", "echo", "hello from run-task")
	rs := results(t, out)
	seen := map[string]bool{}
	for _, r := range rs {
		if r["status"] != "ok" || !strings.Contains(fmt.Sprint(r["stdout"]), "hello from run-task") {
			t.Errorf("result %v", r)
		}
		seen[fmt.Sprint(r["agent"])] = true
	}
	if len(seen) != agents {
		t.Fatalf("results from %v, want every one of %d agents:\n%s", seen, agents, out)
	}
	out = runOperator(t, "task", "--pool", "--json", "--", "/flock-agent", "tool", "echo", "pooled")
	if rs := results(t, out); len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Fatalf("a pool task: %v\n%s", rs, out)
	}
	out = runOperator(t, "agents")
	for i := 1; i <= agents; i++ {
		if !strings.Contains(out, fmt.Sprintf("agent-%d", i)) {
			t.Errorf("`agents` does not list agent-%d:\n%s", i, out)
		}
	}
}

// An agent messages another over the bus, through the MCP server inside its
// task, and the other reads it with the sender the bus vouches for.
func TestFargateAgentsMessage(t *testing.T) {
	need(t)
	body := "hello agent-2, from agent-1 on Fargate " + time.Now().Format(time.RFC3339Nano)
	args, _ := json.Marshal(map[string]any{"to": "agent-2", "body": body})
	out := runOperator(t, "task", "--agent", "agent-1", "--json", "--", "/shared/common/bin/probe", "mcp", "send", string(args))
	rs := results(t, out)
	if len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Fatalf("agent-1 sending: %v\n%s", rs, out)
	}
	var receipt struct{ ID, From, To string }
	if err := json.Unmarshal([]byte(fmt.Sprint(rs[0]["stdout"])), &receipt); err != nil || receipt.From != "agent-1" || receipt.To != "agent-2" {
		t.Fatalf("receipt %q: %v", rs[0]["stdout"], err)
	}
	read, _ := json.Marshal(map[string]any{"wait_seconds": 5, "max": 100})
	out = runOperator(t, "task", "--agent", "agent-2", "--json", "--", "/shared/common/bin/probe", "mcp", "read_inbox", string(read))
	rs = results(t, out)
	if len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Fatalf("agent-2 reading: %v\n%s", rs, out)
	}
	var inbox struct {
		Messages []struct{ ID, From, Body string }
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(rs[0]["stdout"])), &inbox); err != nil {
		t.Fatalf("inbox %q: %v", rs[0]["stdout"], err)
	}
	for _, m := range inbox.Messages {
		if m.ID == receipt.ID {
			if m.From != "agent-1" || m.Body != body {
				t.Fatalf("agent-2 read %+v, want agent-1's message with the sender the bus vouched for", m)
			}
			return
		}
	}
	t.Fatalf("agent-2's inbox %+v lacks message %s", inbox, receipt.ID)
}

// An agent asks the model through the gateway (its token, the stock SDK's
// variables): the answer comes back, the fake model saw the upstream's key,
// which no agent holds.
func TestFargateGatewayModelCall(t *testing.T) {
	need(t)
	out := runOperator(t, "task", "--agent", "agent-1", "--json", "--", "/shared/common/bin/ai-agent", "ask", "What is a flock?")
	rs := results(t, out)
	if len(rs) != 1 || rs[0]["status"] != "ok" || !strings.Contains(fmt.Sprint(rs[0]["stdout"]), fakeAnswer) {
		t.Fatalf("agent-1 asking the model: %v\n%s", rs, out)
	}
	if seen := fakeSeen(t); !strings.Contains(seen, upstreamKey) {
		t.Errorf("the fake model did not see the upstream's key: %s", seen)
	}
	env := runOperator(t, "task", "--agent", "agent-1", "--json", "--", "/flock-agent", "tool", "env")
	if strings.Contains(env, upstreamKey) {
		t.Errorf("the upstream's key is in agent-1's task environment")
	}
}

// The way out on aws: agent-1's stock Go client, configured by its
// environment alone (the proxy URL with its token, from a secret), gets the
// one path its rule allows from a host on the replay's internet through the
// gateway task; another path is refused with a 403 naming the agent and
// the path; agent-2, which no rule names, has no proxy and no route out.
// A brokered rule gives agent-1 the flock's CA in the bundle its runtime
// wrote.
func TestFargateEgress(t *testing.T) {
	need(t)
	run := func(agent string, args ...string) (map[string]any, string) {
		out := runOperatorStatus(t, append([]string{"task", "--agent", agent, "--json", "--", "/shared/common/bin/probe"}, args...)...)
		rs := results(t, out)
		if len(rs) != 1 {
			t.Fatalf("%s %v: %d results\n%s", agent, args, len(rs), out)
		}
		return rs[0], fmt.Sprint(rs[0]["stdout"])
	}
	url := fmt.Sprintf("http://%s:9090", modelHost)
	if r, out := run("agent-1", "get", url+"/_fake/seen"); r["status"] != "ok" || !strings.Contains(out, "STATUS 200") {
		t.Errorf("agent-1 through the gateway to the allowed path: %v\n%s", r["status"], out)
	}
	r, out := run("agent-1", "get", url+"/v1/models")
	if r["status"] == "ok" || !strings.Contains(out, "STATUS 403") || !strings.Contains(out, "agent-1") || !strings.Contains(out, "/v1/models") {
		t.Errorf("agent-1 to a path no rule allows: %v\n%s", r["status"], out)
	}
	if r, out := run("agent-2", "get", url+"/_fake/seen"); r["status"] == "ok" || strings.Contains(out, "STATUS") {
		t.Errorf("agent-2 (no rule) reached the internet: %v\n%s", r["status"], out)
	}
	if r, out := run("agent-1", "read", protocol.EgressCABundleFile); r["status"] != "ok" || !strings.Contains(out, "OK read") {
		t.Errorf("agent-1 has no CA bundle at %s: %v\n%s", protocol.EgressCABundleFile, r["status"], out)
	}
}
