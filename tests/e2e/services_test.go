package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/testkit"
)

// The flock's services (the board) run as a container of their own,
// hardened like the bus, on their own internal network: no published port,
// no agent network, their bus key a 0400 file of their own UID.
func TestServicesHardening(t *testing.T) {
	f := need(t)
	name := f.name + "-services"
	testkit.WaitEvery(t, 90*time.Second, 100*time.Millisecond, "the services container to be healthy", func() bool {
		h, _ := inspect(t, name)["State"].(map[string]any)["Health"].(map[string]any)
		return h != nil && h["Status"] == "healthy"
	})
	doc := inspect(t, name)
	cfg, hc := doc["Config"].(map[string]any), doc["HostConfig"].(map[string]any)
	user, _ := cfg["User"].(string)
	uid, err := strconv.Atoi(strings.Split(user, ":")[0])
	if err != nil || uid < 1000 {
		t.Fatalf("services run as %q", user)
	}
	for id, agentUID := range f.uids {
		if agentUID == uid {
			t.Errorf("services share UID %d with %s", uid, id)
		}
	}
	if hc["ReadonlyRootfs"] != true || hc["Privileged"] == true || fmt.Sprint(hc["CapDrop"]) != "[ALL]" || !strings.Contains(fmt.Sprint(hc["SecurityOpt"]), "no-new-privileges:true") {
		t.Errorf("services: read-only %v, privileged %v, drops %v, security options %v", hc["ReadonlyRootfs"], hc["Privileged"], hc["CapDrop"], hc["SecurityOpt"])
	}
	if hc["Memory"].(float64) == 0 || hc["NanoCpus"].(float64) == 0 {
		t.Errorf("services memory %v cpus %v: want limits", hc["Memory"], hc["NanoCpus"])
	}
	if hc["Runtime"] != "runsc" {
		if pl, _ := hc["PidsLimit"].(float64); pl <= 0 || pidsMax(t, name) != strconv.Itoa(int(pl)) {
			t.Errorf("services PIDs limit %v, cgroup pids.max %s", pl, pidsMax(t, name))
		}
	}
	if ports, _ := doc["NetworkSettings"].(map[string]any)["Ports"].(map[string]any); len(ports) != 0 {
		t.Errorf("services publish %v: they listen on nothing", ports)
	}
	nets := doc["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)
	own := f.name + "-services-net"
	if _, ok := nets[own]; !ok || len(nets) != 1 {
		t.Errorf("services join %v, want %s only", keys(nets), own)
	}
	for _, a := range f.agents {
		anets := inspect(t, container(a))["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)
		if _, on := anets[own]; on {
			t.Errorf("%s is on the services' network", a)
		}
	}
	// No route from an agent to them (control: the bus answers).
	mustSucceed(t, f.agents[0], "dial", "bus:4222")
	out := mustFail(t, f.agents[0], "dial", ipOn(t, name, own)+":4222")
	t.Logf("agent-1 -> services: %s", strings.TrimSpace(out))

	if f.stateRoot != "" {
		fi, err := os.Stat(filepath.Join(f.stateRoot, "services", "nats.nk"))
		if err != nil {
			t.Fatalf("the services' key: %v", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o400 || int(st.Uid) != uid {
			t.Errorf("the services' key: mode %v, owner %d; want 0400, %d", fi.Mode().Perm(), st.Uid, uid)
		}
	}
}

// The board is the services': restarting their container loses nothing,
// and a plan applied before the restart runs to the end after it.
func TestTheBoardSurvivesARestartOfTheServices(t *testing.T) {
	f := need(t)
	cl := boardOperator(t)
	plan := boardPlanID("svc")
	timeout := protocol.Duration(time.Minute)
	tool := func(args ...string) []string { return append([]string{"/flock-agent", "tool"}, args...) }
	name := f.name + "-services"
	if err := f.engine.Stop(context.Background(), name, 10); err != nil {
		t.Fatal(err)
	}
	// With the services stopped, nobody answers the board.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := cl.List(ctx, "")
	cancel()
	if err == nil {
		t.Fatal("the board answered with the services stopped")
	}
	if err := f.engine.Start(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	testkit.WaitEvery(t, 60*time.Second, 100*time.Millisecond, "the restarted services to answer the board", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cl.List(ctx, "")
		return err == nil
	})
	applyBoard(t, cl, protocol.BoardPlan{Plan: plan, Tasks: []protocol.BoardTaskSpec{
		{ID: "a", Run: tool("echo", "a"), Timeout: timeout},
		{ID: "b", Run: tool("echo", "b"), Needs: []string{"a"}, Timeout: timeout},
	}})
	if err := f.engine.Restart(context.Background(), name, 10); err != nil {
		t.Fatal(err)
	}
	tasks := waitPlanOver(t, cl, plan, 2*time.Minute)
	for _, id := range []string{"a", "b"} {
		if tasks[id].Status != protocol.BoardDone {
			t.Errorf("task %s: %s (%s)", id, tasks[id].Status, tasks[id].Reason)
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
