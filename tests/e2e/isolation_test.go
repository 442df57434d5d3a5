package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

const erofs = "errno 30" // EROFS: read-only file system

// gvisor reports whether the flock under test runs under gVisor (runsc).
func gvisor(t *testing.T) bool {
	return hostConfig(t, container(fut.agents[0]))["Runtime"] == "runsc"
}

// readOnly reports whether a probe's failed write says the file system is
// read-only. gVisor checks permissions first: a directory the agent may not
// write (the root's) answers EACCES there, which refuses the write all the
// same (ReadonlyRootfs is checked by TestReadBackMatchesDeclared).
func readOnly(t *testing.T, out string) bool {
	return strings.Contains(out, erofs) || gvisor(t) && strings.Contains(out, "errno 13")
}

// Network: agent-1 reaches the bus and nothing else.
func TestNetworkIsolation(t *testing.T) {
	f, a1, a2 := needTwo(t)

	t.Run("the bus works", func(t *testing.T) {
		mustSucceed(t, a1, "dial", "bus:4222")
	})
	t.Run("agent-1 cannot reach agent-2", func(t *testing.T) {
		ctx := context.Background()
		if err := f.engine.ExecDetached(ctx, container(a2), []string{f.probe[a2], "listen", ":7777"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		ip2 := ipOn(t, container(a2), f.name+"-"+a2+"-net")
		mustSucceed(t, a2, "dial", ip2+":7777") // control: the listener answers
		out := mustFail(t, a1, "dial", ip2+":7777")
		t.Logf("agent-1 -> agent-2 %s:7777: %s", ip2, strings.TrimSpace(out))
	})
	t.Run("the bus's monitoring port is not reachable from an agent", func(t *testing.T) {
		mustFail(t, a1, "dial", "bus:8222")
	})
	t.Run("the bus's metrics relay is not reachable from an agent", func(t *testing.T) {
		mustFail(t, a1, "dial", "bus:"+strconv.Itoa(protocol.MetricsPort))
	})
	t.Run("the host is unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		targets := hostAddresses(t)
		gw := gateway(t, f.name+"-"+a1+"-net")
		targets = append(targets, gw)
		for _, ip := range targets {
			out := mustFail(t, a1, "dial", net.JoinHostPort(ip, port))
			t.Logf("agent-1 -> host %s:%s: %s", ip, port, strings.TrimSpace(out))
		}
		// Control: the same listener answers a container on the default bridge.
		controlDial(t, net.JoinHostPort(targets[0], port))
	})
	t.Run("the outside is unreachable", func(t *testing.T) {
		// The agent's default route points at its network's gateway address,
		// which nobody holds (inhibit_ipv4): the ARP lookup fails on the
		// host-internal bridge and no packet for the outside address leaves it.
		gw := gateway(t, f.name+"-"+a1+"-net")
		out := mustFail(t, a1, "dial", "203.0.113.1:443")
		t.Logf("agent-1 -> 203.0.113.1:443 (via gateway %s, held by nobody): %s", gw, strings.TrimSpace(out))
	})
}

// hostAddresses lists the host's own IPv4 addresses that are not loopback
// and not on a flock network.
func hostAddresses(t *testing.T) []string {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range ifs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() || strings.HasPrefix(ipn.IP.String(), "10.211.") || strings.HasPrefix(ipn.IP.String(), "10.210.") {
			continue
		}
		out = append(out, ipn.IP.String())
	}
	if len(out) == 0 {
		t.Fatal("no host address to probe")
	}
	return out
}

func gateway(t *testing.T, network string) string {
	doc, err := fut.engine.InspectNetwork(context.Background(), network)
	if err != nil {
		t.Fatal(err)
	}
	cfg := doc["IPAM"].(map[string]any)["Config"].([]any)[0].(map[string]any)
	return cfg["Gateway"].(string)
}

// controlDial runs the probe in a throwaway container on the default bridge:
// it shows the host listener is reachable from an ordinary container, so the
// agent's failure to reach it is the flock's isolation, not a dead listener.
func controlDial(t *testing.T, addr string) {
	t.Helper()
	out := runControl(t, "probe", []string{"dial", addr}, "")
	if out.ExitCode != 0 {
		t.Fatalf("control container could not reach %s either (%q): the negative result proves nothing", addr, out.Stdout)
	}
}

// runControl runs the probe in a container with none of the flock's hardening.
func runControl(t *testing.T, bin string, args []string, user string) replay.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	img := controlImage(t)
	dir := filepath.Dir(filepath.Join(fut.sharedRoot, "agents", fut.agents[0], ".probe", "probe"))
	id, err := fut.engine.CreateContainer(ctx, fmt.Sprintf("e2e-control-%d", time.Now().UnixNano()), map[string]any{
		"Image": img, "Entrypoint": []string{"/p/probe"}, "Cmd": []string{"sleep", "60s"}, "User": user,
		"Labels": map[string]string{replay.RunLabel: "1"},
		// Unhardened on purpose, even on an engine whose daemon.json makes
		// no-new-privileges the default (the VM's): the control shows what
		// the agent's settings take away.
		"HostConfig": map[string]any{"Binds": []string{dir + ":/p:ro"}, "SecurityOpt": []string{"no-new-privileges=false"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fut.engine.Remove(context.Background(), id)
	if err := fut.engine.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	res, err := fut.engine.Exec(ctx, id, append([]string{"/p/" + bin}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var controlImg string

// controlImage is an empty image: the probe comes in through a bind mount.
func controlImage(t *testing.T) string {
	if controlImg != "" {
		return controlImg
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nLABEL ai-flock.e2e=1\n"), 0o644)
	id, err := fut.engine.Build(context.Background(), dir, "Dockerfile", "", "ai-flock/e2e-control:latest", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	controlImg = id
	return id
}

// Storage: read-only root; writable only its own directory and tmpfs.
func TestStorageIsolation(t *testing.T) {
	f, a1, a2 := needTwo(t)
	for _, p := range []string{"/probe-write", "/usr/probe-write", "/etc/probe-write", "/shared/probe-write", "/shared/agents/probe-write"} {
		if out := mustFail(t, a1, "write", p); !readOnly(t, out) && !strings.Contains(out, "no such file") {
			t.Errorf("write %s: %q, want a read-only file system", p, out)
		}
	}
	mustSucceed(t, a1, "write", "/shared/agents/"+a1+"/probe-write")
	mustSucceed(t, a1, "write", "/tmp/probe-write")
	if out := mustFail(t, a1, "execfrom", "/tmp"); !strings.Contains(out, "permission denied") {
		t.Errorf("exec from /tmp: %q, want noexec's permission denied", out)
	}
	mustFail(t, a1, "exists", "/shared/agents/"+a2)
	if out := mustFail(t, a1, "write", "/shared/common/probe-write"); !readOnly(t, out) {
		t.Errorf("write to common: %q, want read-only", out)
	}
	// Common is readable: put a file there on the host and read it.
	if err := os.WriteFile(filepath.Join(f.sharedRoot, "common", "shared.txt"), []byte("for everyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, a1, "read", "/shared/common/shared.txt")
	// Logs: its own is there and writable; agent-2's is not even visible.
	mustSucceed(t, a1, "read", protocol.ContainerLogFile(a1))
	mustFail(t, a1, "exists", protocol.ContainerLogFile(a2))
	mustFail(t, a1, "read", protocol.ContainerLogFile(a2))
	// And on the host, agent-2's log belongs to agent-2 alone.
	st, err := os.Stat(filepath.Join(f.sharedRoot, "logs", a2, a2+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != f.uids[a2] || st.Mode().Perm() != 0o600 {
		t.Errorf("agent-2's log: uid %d mode %v, want uid %d mode 0600", sys.Uid, st.Mode().Perm(), f.uids[a2])
	}
	st, err = os.Stat(filepath.Join(f.sharedRoot, "agents", a2))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != f.uids[a2] || st.Mode().Perm() != 0o700 {
		t.Errorf("agent-2's dir: uid %d mode %v, want uid %d mode 0700", sys.Uid, st.Mode().Perm(), f.uids[a2])
	}
}

// Identity and privileges: its own non-root UID, no capabilities, no way up.
func TestIdentityAndPrivileges(t *testing.T) {
	f, a1, a2 := needTwo(t)
	ids := map[string]map[string]string{}
	for _, a := range []string{a1, a2} {
		var id map[string]string
		if err := json.Unmarshal([]byte(mustSucceed(t, a, "id")), &id); err != nil {
			t.Fatal(err)
		}
		ids[a] = id
		if id["uid"] == "0" || id["euid"] == "0" || id["uid"] != fmt.Sprint(f.uids[a]) {
			t.Errorf("%s runs as uid %s euid %s, want %d", a, id["uid"], id["euid"], f.uids[a])
		}
		for _, c := range []string{"CapEff", "CapPrm", "CapBnd"} {
			if id[c] != "0000000000000000" {
				t.Errorf("%s: %s = %s, want no capabilities", a, c, id[c])
			}
		}
		if gvisor(t) {
			// gVisor's /proc reports neither; its own kernel answers the
			// agent's system calls (the sandbox itself runs under runsc's
			// seccomp filter), and the setuid check below still holds.
			if k := mustSucceed(t, a, "kernel"); !strings.HasPrefix(k, "Linux version 4.4.0") {
				t.Errorf("%s under runsc sees kernel %q, want gVisor's (Linux version 4.4.0)", a, k)
			}
			continue
		}
		if id["NoNewPrivs"] != "1" {
			t.Errorf("%s: NoNewPrivs = %s", a, id["NoNewPrivs"])
		}
		if id["Seccomp"] != "2" {
			t.Errorf("%s: Seccomp = %s, want the default filter (2)", a, id["Seccomp"])
		}
	}
	if ids[a1]["uid"] == ids[a2]["uid"] {
		t.Errorf("agent-1 and agent-2 share UID %s", ids[a1]["uid"])
	}
	// A setuid-root binary cannot lift agent-1 to root...
	suid := "/shared/agents/" + a1 + "/.probe/probe-suid"
	res, err := f.engine.Exec(context.Background(), container(a1), []string{suid, "setuid0"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 {
		t.Errorf("setuid-root binary in agent-1: exit %d %q: privileges were raised", res.ExitCode, res.Stdout)
	}
	// ...while the same file does make an unhardened container root: the bit is live.
	ctlSuid := runControl(t, "probe-suid", []string{"setuid0"}, "1000:1000")
	if ctlSuid.ExitCode != 0 {
		t.Errorf("control: the setuid copy did not make an unhardened container root (%q): the agent's refusal proves nothing", ctlSuid.Stdout)
	}
	// Nothing secret in the container's environment.
	env := inspect(t, container(a1))["Config"].(map[string]any)["Env"].([]any)
	for _, e := range env {
		if strings.Contains(e.(string), "=SU") {
			t.Errorf("agent-1's environment holds a seed: %s…", e.(string)[:12])
		}
	}
}
