package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/agent/protocol"
)

func hostConfig(t *testing.T, name string) map[string]any {
	return inspect(t, name)["HostConfig"].(map[string]any)
}

// pidsMax reads the container's cgroup PIDs limit from the host.
func pidsMax(t *testing.T, name string) string {
	id := inspect(t, name)["Id"].(string)
	for _, p := range []string{
		"/sys/fs/cgroup/pids/docker/" + id + "/pids.max",                    // cgroup v1, cgroupfs driver
		"/sys/fs/cgroup/pids/system.slice/docker-" + id + ".scope/pids.max", // cgroup v1, systemd driver
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/pids.max",      // cgroup v2, systemd driver
		"/sys/fs/cgroup/docker/" + id + "/pids.max",                         // cgroup v2, cgroupfs driver
	} {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no pids cgroup found for %s", name)
	return ""
}

// A fork loop stops at the process limit, and agent-2 keeps working.
func TestProcessLimit(t *testing.T) {
	f := need(t)
	a1, a2 := f.agents[0], f.agents[1]
	pl, _ := hostConfig(t, container(a1))["PidsLimit"].(float64) // null when no limit was ever set
	limit := int(pl)
	if limit <= 0 {
		t.Fatalf("agent-1 has no PIDs limit (HostConfig.PidsLimit = %d)", limit)
	}
	if got := pidsMax(t, container(a1)); got != strconv.Itoa(limit) {
		t.Errorf("cgroup pids.max = %s, want %d (CIS 5.29: a real cgroup PIDs limit)", got, limit)
	}
	out := mustSucceed(t, a1, "fork", "10000")
	m := regexp.MustCompile(`started (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("fork probe: %q", out)
	}
	started, _ := strconv.Atoi(m[1])
	if started >= limit {
		t.Errorf("started %d processes under a limit of %d", started, limit)
	}
	t.Logf("fork loop: %d processes started, then refused (%s); limit %d", started, lastLine(out), limit)
	roundTrip(t, a2)
	roundTrip(t, a1)
}

// A memory hog is killed inside its limit, and agent-2 keeps working.
func TestMemoryLimit(t *testing.T) {
	f := need(t)
	a1, a2 := f.agents[0], f.agents[1]
	hc := hostConfig(t, container(a1))
	limitMiB := int(hc["Memory"].(float64)) >> 20
	if limitMiB == 0 || hc["MemorySwap"].(float64) != hc["Memory"].(float64) {
		t.Fatalf("memory %v swap %v: want a limit with swap equal to it", hc["Memory"], hc["MemorySwap"])
	}
	res := probe(t, a1, "hog")
	if res.ExitCode != 137 {
		t.Fatalf("memory hog: exit %d, want 137 (killed); last output %q", res.ExitCode, lastLine(res.Stdout))
	}
	m := regexp.MustCompile(`allocated (\d+) MiB`).FindAllStringSubmatch(res.Stdout, -1)
	reached := 0
	if len(m) > 0 {
		reached, _ = strconv.Atoi(m[len(m)-1][1])
	}
	if reached > limitMiB {
		t.Errorf("hog reached %d MiB over a %d MiB limit", reached, limitMiB)
	}
	t.Logf("memory hog killed after %d MiB (limit %d MiB)", reached, limitMiB)
	if st := inspect(t, container(a1))["State"].(map[string]any); st["Running"] != true {
		t.Errorf("agent-1 itself died: %v", st)
	}
	roundTrip(t, a2)
	roundTrip(t, a1)
}

// CPU use is held to the quota.
func TestCPULimit(t *testing.T) {
	f := need(t)
	a1 := f.agents[0]
	quota := hostConfig(t, container(a1))["NanoCpus"].(float64) / 1e9
	if quota <= 0 {
		t.Fatal("agent-1 has no CPU quota")
	}
	var got map[string]float64
	if err := json.Unmarshal([]byte(mustSucceed(t, a1, "burn", "3s")), &got); err != nil {
		t.Fatal(err)
	}
	used := got["cpu"] / got["wall"]
	t.Logf("CPU burn on %v CPUs for %.1fs: %.2f cores used, quota %.2f", got["cpus"], got["wall"], used, quota)
	if used > quota*1.25+0.05 {
		t.Errorf("used %.2f cores with a quota of %.2f", used, quota)
	}
}

// roundTrip sends a task to one agent and waits for its ok result.
func roundTrip(t *testing.T, agent string) {
	t.Helper()
	nc, js := jsClient(t)
	rs := watchResults(t, nc)
	id := taskID(t, agent)
	publish(t, js, "tasks."+agent, taskEcho(id, "still here"))
	got := rs.collect(t, 30*time.Second, func(m map[string][]protocol.Result) bool { return len(m[id]) > 0 })
	if r := got[id][0]; !r.OK() || r.Agent != agent {
		t.Fatalf("%s: result %+v", agent, r)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Bus permissions, exercised with agent-1's own credentials from inside its
// container: it can neither act as agent-2 nor listen to it.
func TestBusPermissionsFromContainer(t *testing.T) {
	f := need(t)
	a1, a2 := f.agents[0], f.agents[1]
	out := mustSucceed(t, a1, "nats", "nats://bus:4222", "/etc/flock/nats.nk", a2)
	var outcome map[string]string
	if err := json.Unmarshal([]byte(out), &outcome); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if outcome["publish own heartbeat"] != "allowed" {
		t.Errorf("control: agent-1 cannot publish its own heartbeat: %s", outcome["publish own heartbeat"])
	}
	for k, v := range outcome {
		if k == "publish own heartbeat" {
			continue
		}
		if !strings.HasPrefix(v, "denied") {
			t.Errorf("agent-1 may %s: %s", k, v)
		} else {
			t.Logf("%s: %s", k, v)
		}
	}
	if len(outcome) < 11 {
		t.Errorf("only %d attempts reported: %v", len(outcome), outcome)
	}
}

// The bus, the one thing every agent can reach, is hardened like the agents
// and publishes its ports on loopback only.
func TestBusHardening(t *testing.T) {
	f := need(t)
	bus := f.name + "-bus"
	doc := inspect(t, bus)
	cfg, hc := doc["Config"].(map[string]any), doc["HostConfig"].(map[string]any)
	if u, _ := cfg["User"].(string); u == "" || strings.HasPrefix(u, "0:") || u == "0" || u == "root" {
		t.Errorf("bus runs as %q", u)
	}
	if hc["ReadonlyRootfs"] != true || hc["Privileged"] == true {
		t.Errorf("bus: read-only %v, privileged %v", hc["ReadonlyRootfs"], hc["Privileged"])
	}
	if drops := fmt.Sprint(hc["CapDrop"]); drops != "[ALL]" {
		t.Errorf("bus drops %s, want [ALL]", drops)
	}
	if !strings.Contains(fmt.Sprint(hc["SecurityOpt"]), "no-new-privileges:true") {
		t.Errorf("bus security options %v", hc["SecurityOpt"])
	}
	if hc["Memory"].(float64) == 0 || hc["NanoCpus"].(float64) == 0 {
		t.Errorf("bus memory %v cpus %v: want limits", hc["Memory"], hc["NanoCpus"])
	}
	pl, _ := hc["PidsLimit"].(float64) // null when no limit was ever set
	limit := int(pl)
	if limit <= 0 || pidsMax(t, bus) != strconv.Itoa(limit) {
		t.Errorf("bus PIDs limit %d, cgroup pids.max %s", limit, pidsMax(t, bus))
	}
	ports := doc["NetworkSettings"].(map[string]any)["Ports"].(map[string]any)
	if len(ports) == 0 {
		t.Fatal("bus publishes no ports")
	}
	for port, bindings := range ports {
		for _, b := range bindings.([]any) {
			if ip := b.(map[string]any)["HostIp"]; ip != "127.0.0.1" {
				t.Errorf("bus publishes %s on %v, want 127.0.0.1 only", port, ip)
			}
		}
	}
}
