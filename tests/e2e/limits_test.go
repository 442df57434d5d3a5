package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
)

func hostConfig(t *testing.T, name string) map[string]any {
	return inspect(t, name)["HostConfig"].(map[string]any)
}

// limited is what a test of a limit needs: agent-1, which meets it, with
// its HostConfig, and agent-2, which must keep working meanwhile.
func limited(t *testing.T) (a1, a2 string, hc map[string]any) {
	t.Helper()
	_, a1, a2 = needTwo(t)
	return a1, a2, hostConfig(t, container(a1))
}

// cgroupFile reads one file of a container's cgroup from the host.
func cgroupFile(t *testing.T, name, controller, file string) string {
	t.Helper()
	id := inspect(t, name)["Id"].(string)
	for _, p := range []string{
		"/sys/fs/cgroup/" + controller + "/docker/" + id + "/" + file,                    // cgroup v1, cgroupfs driver
		"/sys/fs/cgroup/" + controller + "/system.slice/docker-" + id + ".scope/" + file, // cgroup v1, systemd driver
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/" + file,                    // cgroup v2, systemd driver
		"/sys/fs/cgroup/docker/" + id + "/" + file,                                       // cgroup v2, cgroupfs driver
	} {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no %s cgroup file %s found for %s", controller, file, name)
	return ""
}

// pidsMax reads the container's cgroup PIDs limit from the host.
func pidsMax(t *testing.T, name string) string { return cgroupFile(t, name, "pids", "pids.max") }

// cpuUsed reads the CPU time a container's cgroup has used, from the host:
// what the kernel charged, whatever the sandbox tells its own processes.
func cpuUsed(t *testing.T, name string) time.Duration {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/cpuacct"); err == nil { // cgroup v1
		ns, err := strconv.ParseInt(cgroupFile(t, name, "cpuacct", "cpuacct.usage"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(ns)
	}
	for _, line := range strings.Split(cgroupFile(t, name, "", "cpu.stat"), "\n") { // cgroup v2
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return time.Duration(us) * time.Microsecond
		}
	}
	t.Fatalf("no usage_usec in %s's cpu.stat", name)
	return 0
}

// A fork loop stops at the process limit, and agent-2 keeps working.
func TestProcessLimit(t *testing.T) {
	a1, a2, hc := limited(t)
	var limit int
	if hc["Runtime"] == "runsc" {
		// gVisor: the sandbox's own kernel enforces the nproc ulimit, for
		// this container's processes alone (runsc takes no cgroup update).
		limit = nprocLimit(t, hc)
	} else {
		pl, _ := hc["PidsLimit"].(float64) // null when no limit was ever set
		if limit = int(pl); limit <= 0 {
			t.Fatalf("agent-1 has no PIDs limit (HostConfig.PidsLimit = %d)", limit)
		}
		if got := pidsMax(t, container(a1)); got != strconv.Itoa(limit) {
			t.Errorf("cgroup pids.max = %s, want %d (CIS 5.29: a real cgroup PIDs limit)", got, limit)
		}
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

// nprocLimit is a container's hard nproc ulimit.
func nprocLimit(t *testing.T, hc map[string]any) int {
	t.Helper()
	ulimits, _ := hc["Ulimits"].([]any)
	for _, u := range ulimits {
		if m, _ := u.(map[string]any); m["Name"] == "nproc" {
			if hard, _ := m["Hard"].(float64); hard > 0 {
				return int(hard)
			}
		}
	}
	t.Fatalf("no nproc ulimit in %v", ulimits)
	return 0
}

// A memory hog is killed inside its limit, and agent-2 keeps working.
func TestMemoryLimit(t *testing.T) {
	a1, a2, hc := limited(t)
	limitMiB := int(hc["Memory"].(float64)) >> 20
	if limitMiB == 0 || hc["MemorySwap"].(float64) != hc["Memory"].(float64) {
		t.Fatalf("memory %v swap %v: want a limit with swap equal to it", hc["Memory"], hc["MemorySwap"])
	}
	if hc["Runtime"] == "runsc" {
		memoryLimitGVisor(t, a1, a2)
		return
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

// memoryLimitGVisor: under gVisor the memory limit holds for the sandbox as
// a whole, so a hog takes its agent down with it: the host kills the sandbox,
// Docker restarts the agent (its tasks are redelivered), agent-2 never
// notices. (The exec of the hog never returns: runsc loses it with the
// sandbox.)
func memoryLimitGVisor(t *testing.T, a1, a2 string) {
	restarts := func() float64 { n, _ := inspect(t, container(a1))["RestartCount"].(float64); return n }
	before := restarts()
	start := time.Now().Add(-time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _ = fut.engine.Exec(ctx, container(a1), []string{fut.probe[a1], "hog"}, "AGENT_ID="+a1)
	// The exec may return before Docker has recorded the kill and
	// restarted the container: wait for the restart. Without the limit the
	// hog would run on (this machine has far more memory) and nothing would
	// restart. Docker does not always call the sandbox's death an OOM kill
	// (seen once: the restart, and OOMKilled never set), and a restart
	// clears the flag, so the flag and the engine's oom event are reported,
	// not required.
	oom := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		st := inspect(t, container(a1))["State"].(map[string]any)
		oom = oom || st["OOMKilled"] == true
		if !oom {
			n, err := fut.engine.OOMEvents(context.Background(), container(a1), start)
			oom = err == nil && n > 0
		}
		if restarts() > before && st["Running"] == true {
			break
		}
	}
	if restarts() <= before {
		t.Fatalf("memory hog under gVisor: restarts %v -> %v (OOM reported: %v); want the sandbox killed at its limit and restarted", before, restarts(), oom)
	}
	t.Logf("memory hog under gVisor: sandbox killed and restarted (restart %v; reported as an OOM kill: %v)", restarts(), oom)
	roundTrip(t, a2)
	if err := fut.waitForHeartbeats(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
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
	// Measured on the host: under gVisor the sandbox's own clock reports
	// unthrottled CPU time to the process.
	before := cpuUsed(t, container(a1))
	var got map[string]float64
	if err := json.Unmarshal([]byte(mustSucceed(t, a1, "burn", "3s")), &got); err != nil {
		t.Fatal(err)
	}
	used := (cpuUsed(t, container(a1)) - before).Seconds() / got["wall"]
	bound := quota*1.25 + 0.05
	if os.Getenv("FLOCK_E2E_EMULATED") == "1" {
		// A VM under software emulation (QEMU's TCG, no KVM): its kernel
		// charges a task for the time its vCPU was not run by the host as
		// well, and its CFS timer fires late, so the quota reads loose (0.55
		// to 0.89 cores of 0.50 measured). Still the quota, not the burn's
		// every CPU, is what it shows: at most half the CPUs it burned on.
		bound = max(bound, min(quota*2.5, 0.5*got["cpus"]))
	}
	t.Logf("CPU burn on %v CPUs for %.1fs: %.2f cores used (host cgroup), quota %.2f, bound %.2f", got["cpus"], got["wall"], used, quota, bound)
	if used > bound {
		t.Errorf("used %.2f cores with a quota of %.2f", used, quota)
	}
}

// roundTrip sends a task to one agent and waits for its ok result.
func roundTrip(t *testing.T, agent string) {
	t.Helper()
	_, js, rs := jsResults(t)
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
	_, a1, a2 := needTwo(t)
	out := mustSucceed(t, a1, "nats", "nats://bus:4222", protocol.ContainerCredsFile, a2)
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
	if len(outcome) < 18 {
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
	if hc["Runtime"] == "runsc" {
		nprocLimit(t, hc) // gVisor's own kernel enforces it (TestProcessLimit)
	} else {
		pl, _ := hc["PidsLimit"].(float64) // null when no limit was ever set
		limit := int(pl)
		if limit <= 0 || pidsMax(t, bus) != strconv.Itoa(limit) {
			t.Errorf("bus PIDs limit %d, cgroup pids.max %s", limit, pidsMax(t, bus))
		}
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
