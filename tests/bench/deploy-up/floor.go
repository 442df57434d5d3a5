package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/dockerflock"
	"github.com/ai-flock/ai-flock/infra/flock"
)

// The floors' containers and networks carry this label (not the flock's:
// nothing of theirs is mistaken for a flock's).
const (
	floorLabel  = "ai-flock-bench.floor"
	floorPrefix = "flockbench"
	floorImage  = "flockbench-agent:floor"
)

// floorModel is the flock's model for n agents, with the floor's own host
// directories: the same UIDs, subnets, limits and prepare scripts.
func floorModel(n int) (flock.Model, error) {
	cfg := flock.Config{Target: "docker", AgentCount: &n, Shared: flock.SharedConfig{Root: benchRoot + "/floor/shared", StateRoot: benchRoot + "/floor/state"}}
	return cfg.Validate()
}

// floor makes n agent containers from the template, parallel at a time,
// and returns how long it took until every one was healthy. With work, it
// also does the flock's own per-agent work with plain tools (sh and the
// docker CLI) and makes the bus's container.
func (b *bench) floor(ctx context.Context, n int, work bool) (time.Duration, error) {
	m, err := floorModel(n)
	if err != nil {
		return 0, err
	}
	defer b.floorCleanup(context.WithoutCancel(ctx), m)
	if !work {
		// Containers alone: their bind mounts' sources exist before the clock starts.
		for _, a := range m.Agents {
			for _, d := range []string{m.Shared.AgentDir(a.ID), m.Shared.CommonDir(), m.Shared.LogDir(a.ID), m.Shared.CredsDir(a.ID)} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return 0, err
				}
			}
			if err := os.WriteFile(m.Shared.LogFile(a.ID), nil, 0o644); err != nil {
				return 0, err
			}
		}
	}
	start := time.Now()
	bus := floorPrefix + "-bus"
	if work {
		if err := b.sh(ctx, dockerflock.LayoutScript(m)); err != nil {
			return 0, err
		}
		if err := b.floorBus(ctx, bus); err != nil {
			return 0, err
		}
	}
	sem := make(chan struct{}, b.parallel)
	var wg sync.WaitGroup
	errs := make(chan error, len(m.Agents))
	for _, a := range m.Agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := b.floorAgent(ctx, m, a, work, bus); err != nil {
				errs <- fmt.Errorf("%s: %w", a.ID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return b.waitHealthy(ctx, start, floorLabel+"=agent", agentNames(floorPrefix, n), nil)
}

// floorAgent makes one agent: with work, the prepare script (quota
// filesystems, credentials) beside its network, the bus's join, the
// container, its PIDs limit; without, the network and the container.
func (b *bench) floorAgent(ctx context.Context, m flock.Model, a flock.Agent, work bool, bus string) error {
	net := fmt.Sprintf("%s-%s-net", floorPrefix, a.ID)
	name := fmt.Sprintf("%s-%s", floorPrefix, a.ID)
	prepared := make(chan error, 1)
	if work {
		go func() {
			key, err := credentials.Derive([]byte(strings.Repeat("b", 32)), a.ID)
			if err == nil {
				err = b.sh(ctx, dockerflock.AgentScript(m, a, key.Seed))
			}
			prepared <- err
		}()
	} else {
		prepared <- nil
	}
	if _, err := b.eng.CreateNetwork(ctx, b.networkRequest(net, a)); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if work {
		// As the flock's bus-link step: connect, then check the bus is there.
		ip := dockerflock.AgentBusAddress(a).String()
		script := fmt.Sprintf("docker network connect --ip %s --alias bus %s %s 2>&1 | grep -v 'already exists' || true; docker network inspect -f '{{range .Containers}}{{.Name}} {{end}}' %s | grep -qw %s", ip, net, bus, net, bus)
		if out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput(); err != nil {
			return fmt.Errorf("bus link: %w: %s", err, out)
		}
	}
	if err := <-prepared; err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	id, err := b.eng.CreateContainer(ctx, name, b.containerRequest(m, a, net, !work))
	if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if err := b.eng.Start(ctx, id); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if work {
		if out, err := exec.CommandContext(ctx, "docker", "update", "--pids-limit", strconv.Itoa(a.Limits.Pids), name).CombinedOutput(); err != nil {
			return fmt.Errorf("pids limit: %w: %s", err, out)
		}
	}
	return nil
}

// floorBus is the bus's stand-in: the agent image idle on a network of its own.
func (b *bench) floorBus(ctx context.Context, name string) error {
	m, err := floorModel(1)
	if err != nil {
		return err
	}
	a := m.Agents[0]
	net := floorPrefix + "-bus-net"
	a.Subnet, _ = dockerflock.BusAddress(m)
	if _, err := b.eng.CreateNetwork(ctx, b.networkRequest(net, a)); err != nil {
		return fmt.Errorf("bus network: %w", err)
	}
	req := b.containerRequest(m, m.Agents[0], net, true)
	req["Labels"] = map[string]string{floorLabel: "bus"}
	delete(req["HostConfig"].(map[string]any), "Mounts") // an agent's directories are not the bus's
	id, err := b.eng.CreateContainer(ctx, name, req)
	if err != nil {
		return fmt.Errorf("bus container: %w", err)
	}
	return b.eng.Start(ctx, id)
}

// networkRequest is the template's network for agent a: same driver,
// options and internal flag, a's subnet.
func (b *bench) networkRequest(name string, a flock.Agent) map[string]any {
	return map[string]any{
		"Name":     name,
		"Driver":   b.tmplNet["Driver"],
		"Internal": b.tmplNet["Internal"],
		"Options":  b.tmplNet["Options"],
		"IPAM":     map[string]any{"Config": []map[string]string{{"Subnet": a.Subnet.String(), "Gateway": a.Subnet.Addr().Next().String()}}},
		"Labels":   map[string]string{floorLabel: "agent"},
	}
}

// containerRequest is the template's container for agent a: its Config and
// HostConfig with a's name, UID, directories and network; it idles, and its
// health check (the same interval) passes at once. withPids keeps the PIDs
// limit in HostConfig (the containers-alone floor sets it at creation).
func (b *bench) containerRequest(m flock.Model, a flock.Agent, net string, withPids bool) map[string]any {
	var cfg, host map[string]any
	remarshal(b.tmpl["Config"], &cfg)
	remarshal(b.tmpl["HostConfig"], &host)
	tmplUID := strings.SplitN(fmt.Sprint(cfg["User"]), ":", 2)[0]
	uid := strconv.Itoa(a.UID)
	cfg["Hostname"] = a.ID
	cfg["User"] = uid + ":" + uid
	cfg["Labels"] = map[string]string{floorLabel: "agent"}
	cfg["Cmd"] = []string{"tool", "sleep", "100000h"}
	if hc, ok := cfg["Healthcheck"].(map[string]any); ok {
		hc["Test"] = []string{"CMD", "/flock-agent", "tool", "exit", "0"}
	}
	delete(cfg, "Env")
	swap := strings.NewReplacer("agent-1", a.ID, benchRoot+"/flock/", benchRoot+"/floor/")
	if mounts, ok := host["Mounts"].([]any); ok {
		for _, x := range mounts {
			mt := x.(map[string]any)
			mt["Source"] = swap.Replace(fmt.Sprint(mt["Source"]))
			mt["Target"] = swap.Replace(fmt.Sprint(mt["Target"]))
		}
	}
	if tmpfs, ok := host["Tmpfs"].(map[string]any); ok {
		for k, v := range tmpfs {
			tmpfs[k] = strings.ReplaceAll(fmt.Sprint(v), "="+tmplUID, "="+uid)
		}
	}
	host["NetworkMode"] = net
	if !withPids {
		delete(host, "PidsLimit")
	}
	cfg["HostConfig"] = host
	cfg["NetworkingConfig"] = map[string]any{"EndpointsConfig": map[string]any{net: map[string]any{}}}
	return cfg
}

func remarshal(in any, out any) {
	raw, _ := json.Marshal(in)
	_ = json.Unmarshal(raw, out)
}

// sh runs a script as root through sh, on stdin, as the flock's steps do.
func (b *bench) sh(ctx context.Context, script string) error {
	c := exec.CommandContext(ctx, "sh", "-s")
	c.Stdin = strings.NewReader(script)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// floorCleanup removes what a floor made (untimed): containers, networks,
// mounts and directories.
func (b *bench) floorCleanup(ctx context.Context, m flock.Model) {
	ids, _ := b.eng.ListContainers(ctx, floorLabel)
	for _, id := range ids {
		_ = b.eng.Remove(ctx, id)
	}
	nets, _ := b.eng.ListNetworks(ctx, floorLabel)
	for _, id := range nets {
		_ = b.eng.RemoveNetwork(ctx, id)
	}
	for _, a := range m.Agents {
		_ = b.sh(ctx, dockerflock.AgentCleanupScript(m, a))
	}
	_ = os.RemoveAll(filepath.Join(benchRoot, "floor"))
}
