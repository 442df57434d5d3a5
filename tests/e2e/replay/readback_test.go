package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// engineView is the inspect document of what the engine stores for a create
// request: the request's own fields, as JSON. The e2e suite checks the same
// against real inspect documents.
func engineView(t *testing.T, name string, req map[string]any) map[string]any {
	t.Helper()
	cfg := map[string]any{}
	for k, v := range req {
		if k != "HostConfig" {
			cfg[k] = v
		}
	}
	host := req["HostConfig"].(map[string]any)
	doc := map[string]any{"Name": "/" + name, "Config": cfg, "HostConfig": host,
		"NetworkSettings": map[string]any{"Ports": host["PortBindings"]}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func toJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(v)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every input the dev stack declares must read back from the provider as
// declared, or every preview shows a change (and cpus, a replacement).
func TestDevStackReadsBackAsDeclared(t *testing.T) {
	for _, cfg := range []capture.Config{
		{},
		{"flock:bus": `{"limits": {"cpus": 2, "memoryMiB": 512, "pids": 512, "tmpfsMiB": 16}}`},
		{"flock:limits": `{"cpus": 1.25, "memoryMiB": 256, "pids": 128, "tmpfsMiB": 64, "taskTimeout": "5m", "concurrency": 2}`},
		{"flock:overrides": `{"agent-2": {"cpus": 10}}`},
	} {
		stack, err := capture.RunDev(cfg)
		if err != nil {
			t.Fatal(err)
		}
		containers, networks := 0, 0
		for _, r := range stack.Resources {
			in := Inputs(r)
			switch r.Type {
			case capture.TypeContainer:
				containers++
				req, err := containerRequest(in, "sha256:0")
				if err != nil {
					t.Fatalf("%s: %v", r.Name, err)
				}
				for _, d := range Drift(in, ContainerState(engineView(t, Str(in["name"]), req))) {
					t.Errorf("config %v: container %s: %s", cfg, r.Name, d)
				}
			case capture.TypeNetwork:
				networks++
				for _, d := range Drift(in, NetworkState(toJSON(t, networkRequest(in)))) {
					t.Errorf("config %v: network %s: %s", cfg, r.Name, d)
				}
			}
		}
		if containers < 4 || networks < 4 {
			t.Fatalf("captured %d containers and %d networks; want the bus and 3 agents", containers, networks)
		}
	}
}

// The check fails on a value that reads back in another spelling: a CPU
// count declared "1" reads back "1.0" (what replaced the bus on every up).
func TestDriftCatchesAReadBackChange(t *testing.T) {
	stack, err := capture.RunDev(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stack.Resources {
		if r.Type != capture.TypeContainer {
			continue
		}
		in := Inputs(r)
		for spelling, readBack := range map[string]string{"1": `"1.0"`, "0.05": `"0.1"`, "10.0": `"10."`} {
			in["cpus"] = spelling
			req, err := containerRequest(in, "sha256:0")
			if err != nil {
				t.Fatal(err)
			}
			drift := Drift(in, ContainerState(engineView(t, Str(in["name"]), req)))
			if len(drift) != 1 || !strings.Contains(drift[0], "cpus") || !strings.Contains(drift[0], readBack) {
				t.Errorf("cpus %q: drift %q, want cpus reading back as %s", spelling, drift, readBack)
			}
		}
		// A map is compared whole: a key the engine added is a change.
		state := ContainerState(engineView(t, "x", map[string]any{"HostConfig": map[string]any{"Tmpfs": map[string]any{"/tmp": "rw,size=1m", "/run": "rw"}}}))
		if d := Drift(map[string]any{"tmpfs": map[string]any{"/tmp": "rw,size=1m"}}, state); len(d) != 1 {
			t.Errorf("a tmpfs map with an extra key read back: drift %q, want one change", d)
		}
		return
	}
	t.Fatal("no container captured")
}
