// Command vmflock deploys the dev stack into the VM's Docker engine from the
// host, through docker:host ssh://…, runs the isolation probes inside the VM
// against it, and takes it down again: the path where the host steps run
// over SSH, proven on a booted VM.
//
// The stack is the dev stack as Pulumi.dev.yaml declares it, with docker:host
// set to the VM's SSH login (and a smaller disk per agent, for speed). Without the Pulumi CLI (CI builds none) the
// deployment is the replay of the testing layers: the program run under the
// mock engine, then each resource created as the docker and command
// providers would create it. The engine is reached through the VM's Docker
// socket forwarded over the same SSH login; every host step runs its own
// ssh, as under `pulumi up`. The probes are tests/e2e compiled on the host
// and run in the VM as root (they read the agents' directories), attached to
// the deployed flock as layer 3 attaches to a `pulumi up`.
//
//	go run ./tests/vm/vmflock -ssh-config .vagrant/ssh-config -host flock-vm
//
// ssh finds the VM through -ssh-config: run.sh puts an ssh on PATH that
// reads it, so the docker CLI and the host steps use it too.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// probes are the tests/e2e probes that hold against an attached flock and
// leave it as it was (the others kill or restart containers: replay only).
// The floods are left out by default: under software emulation they take
// minutes each; FLOCK_VM_PROBES runs any list.
const probes = "TestTaskRouting|TestNetworkIsolation|TestStorageIsolation|TestIdentityAndPrivileges|" +
	"TestProcessLimit|TestMemoryLimit|TestCPULimit|TestBusPermissionsFromContainer|TestBusHardening|" +
	"TestHostileDiskFill|TestHostileLogFill|TestHostileForgedPoolResult|TestAgentsMessageOverMCP"

type config struct {
	sshConfig string // ssh_config with the VM's login (vagrant ssh-config)
	host      string // its Host alias
	user      string // the login, in the docker group and with sudo
	busURL    string // the bus's client port forwarded to this host
	monitor   string // its monitoring port forwarded to this host
	probes    string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg config
	flag.StringVar(&cfg.sshConfig, "ssh-config", "", "ssh_config file naming the VM (vagrant ssh-config)")
	flag.StringVar(&cfg.host, "host", "flock-vm", "the VM's Host alias in -ssh-config")
	flag.StringVar(&cfg.user, "user", "vagrant", "the VM's login")
	flag.StringVar(&cfg.busURL, "bus-url", "", "the bus's client port as this host reaches it (Vagrant's forwarded port)")
	flag.StringVar(&cfg.monitor, "monitor-url", "", "the bus's monitoring port as this host reaches it")
	flag.Parse()
	cfg.probes = os.Getenv("FLOCK_VM_PROBES")
	if cfg.probes == "" {
		cfg.probes = probes
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "vmflock:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("vmflock: "+format+"\n", args...)
}

func run(ctx context.Context, cfg config) (err error) {
	if cfg.sshConfig == "" {
		return errors.New("-ssh-config is required (vagrant ssh-config --host flock-vm > FILE)")
	}
	root, err := capture.ProjectRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "vmflock-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	// The images are built from agent/, as make deploy builds them first.
	if err := capture.BuildImageContext(root); err != nil {
		return err
	}

	sock := filepath.Join(work, "docker.sock")
	fwd, err := forwardSocket(ctx, cfg, sock)
	if err != nil {
		return err
	}
	defer func() { fwd.Process.Kill(); fwd.Wait() }()
	os.Setenv("DOCKER_HOST", "unix://"+sock) // the replay's engine; host steps set their own
	engine, err := replay.NewEngine()
	if err != nil {
		return err
	}

	dockerHost := "ssh://" + cfg.user + "@" + cfg.host
	// The dev stack's limits but a 64 MiB disk per agent: the disk-fill probe
	// writes four times the quota, which under software emulation takes
	// minutes with the default 1 GiB.
	stack, err := capture.RunDev(capture.Config{
		"docker:host":  dockerHost,
		"flock:limits": `{"cpus": 0.5, "memoryMiB": 256, "pids": 128, "tmpfsMiB": 64, "taskTimeout": "5m", "concurrency": 2, "diskMiB": 64}`,
	})
	if err != nil {
		return fmt.Errorf("capture the dev stack: %w", err)
	}
	start := time.Now()
	flock, err := replay.Replay(ctx, engine, stack, root, func(string, ...any) {})
	// Whatever happened, take down what was made, as pulumi destroy would,
	// and check that nothing is left.
	defer func() {
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		t0 := time.Now()
		if flock != nil {
			if terr := flock.Teardown(tctx); terr != nil {
				err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
			}
		}
		if cerr := leftovers(tctx, cfg, engine); cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			logf("destroyed in %s: no container, network or credential of the flock left in the VM", time.Since(t0).Round(100*time.Millisecond))
		}
	}()
	if err != nil {
		return fmt.Errorf("deploy into the VM: %w", err)
	}
	logf("deployed the dev stack (%d resources) into the VM through docker:host %s in %s", len(stack.Resources), dockerHost, time.Since(start).Round(100*time.Millisecond))
	if err := hostReachesBus(ctx, cfg, stack); err != nil {
		return err
	}

	return runProbes(ctx, cfg, root, work, stack)
}

// hostReachesBus checks the bus from this host through the VM's forwarded
// ports, as an operator on the host uses it: monitoring answers, and the
// operator's key connects and hears every agent's heartbeat.
func hostReachesBus(ctx context.Context, cfg config, stack *capture.Stack) error {
	if cfg.monitor != "" {
		var last error
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
			resp, err := http.Get(cfg.monitor + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("status %s", resp.Status)
			}
			last = err
			if time.Now().After(deadline) {
				return fmt.Errorf("the bus's monitoring port from the host (%s/healthz): %w", cfg.monitor, last)
			}
		}
		logf("the bus's monitoring port answers on the host at %s", cfg.monitor)
	}
	if cfg.busURL == "" {
		return nil
	}
	seed, _ := stack.Outputs["operatorSeed"].Value.(string)
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return fmt.Errorf("the operator seed of the stack outputs: %w", err)
	}
	pub, _ := kp.PublicKey()
	// Under software emulation the forwarded port accepts at once on the host
	// while the bus's INFO crosses the VM's user-mode network slowly: a
	// connect gets a longer first read than nats.go's 2 s and is tried again
	// for as long as the monitoring port was given.
	var nc *nats.Conn
	for deadline := time.Now().Add(2 * time.Minute); ; {
		nc, err = nats.Connect(cfg.busURL, nats.Nkey(pub, kp.Sign), nats.Name("vmflock-operator"),
			nats.Timeout(15*time.Second))
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the operator connects to the bus from the host (%s): %w", cfg.busURL, err)
		}
		logf("the operator's connect through %s: %v; trying again", cfg.busURL, err)
		time.Sleep(2 * time.Second)
	}
	defer nc.Close()
	agents := map[string]bool{}
	if list, ok := stack.Outputs["agents"].Value.([]any); ok {
		for _, a := range list {
			if m, ok := a.(map[string]any); ok {
				agents[fmt.Sprint(m["id"])] = false
			}
		}
	}
	if len(agents) == 0 {
		return errors.New("the stack outputs list no agent")
	}
	beats := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(protocol.SubjectHeartbeats, beats)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	timeout := time.After(3 * time.Minute)
	for heard := 0; heard < len(agents); {
		select {
		case m := <-beats:
			var hb protocol.Heartbeat
			if json.Unmarshal(m.Data, &hb) == nil && hb.State == protocol.StateReady {
				if seen, ok := agents[hb.Agent]; ok && !seen {
					agents[hb.Agent] = true
					heard++
				}
			}
		case <-timeout:
			return fmt.Errorf("heartbeats heard from the host through %s: %v (true: heard)", cfg.busURL, agents)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	logf("the operator on the host, through %s, hears all %d agents ready", cfg.busURL, len(agents))
	return nil
}

// forwardSocket forwards the VM's Docker socket to sock over SSH.
func forwardSocket(ctx context.Context, cfg config, sock string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, "ssh", "-F", cfg.sshConfig, "-nNT", "-o", "ExitOnForwardFailure=yes",
		"-L", sock+":/var/run/docker.sock", cfg.host)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("forward the VM's Docker socket: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return cmd, nil
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, errors.New("the VM's Docker socket was not forwarded within 30s")
}

// runProbes writes the stack's outputs as `pulumi stack output --json
// --show-secrets` prints them, copies them, the probe and the compiled
// tests/e2e into the VM, and runs the probes there as root.
func runProbes(ctx context.Context, cfg config, root, work string, stack *capture.Stack) error {
	outputs := map[string]any{}
	for k, o := range stack.Outputs {
		outputs[k] = o.Value
	}
	doc, err := json.Marshal(outputs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "outputs.json"), doc, 0o600); err != nil {
		return err
	}
	if err := capture.GoBuild(root, filepath.Join(work, "probe"), "./tests/e2e/probe"); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", filepath.Join(work, "e2e.test"), "./tests/e2e")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile tests/e2e: %v\n%s", err, out)
	}
	const dir = "/tmp/flock-vm-probes"
	if err := sshRun(ctx, cfg, nil, "rm -rf "+dir+" && mkdir -m 0700 "+dir); err != nil {
		return err
	}
	for _, f := range []string{"outputs.json", "probe", "e2e.test"} {
		in, err := os.Open(filepath.Join(work, f))
		if err != nil {
			return err
		}
		err = sshRun(ctx, cfg, in, "cat > "+dir+"/"+f+" && chmod 0700 "+dir+"/"+f)
		in.Close()
		if err != nil {
			return fmt.Errorf("copy %s into the VM: %w", f, err)
		}
	}
	name := "flock"
	if n, ok := stack.Outputs["name"]; ok {
		name = fmt.Sprint(n.Value)
	}
	// In the VM's copy of the repository (the synced folder), as the tests
	// look for the project root from their directory.
	// Under software emulation the CPU probe's bound is the emulated one
	// (TestCPULimit says why).
	emulated := ""
	if os.Getenv("FLOCK_VM_LIBVIRT_DRIVER") == "qemu" {
		emulated = "FLOCK_E2E_EMULATED=1 "
	}
	script := fmt.Sprintf("cd /vagrant/tests/e2e && sudo env FLOCK_E2E=1 FLOCK_REQUIRE_DOCKER=1 FLOCK_E2E_TARGET=pulumi "+emulated+
		"FLOCK_E2E_OUTPUTS=%[1]s/outputs.json FLOCK_E2E_PROBE=%[1]s/probe FLOCK_E2E_NAME=%[2]s "+
		"%[1]s/e2e.test -test.count=1 -test.timeout=20m -test.v -test.run '^(%[3]s)$'", dir, name, cfg.probes)
	t0 := time.Now()
	var out strings.Builder
	perr := sshRun(ctx, cfg, nil, script, io.MultiWriter(os.Stdout, &out))
	passed, skipped, failed := strings.Count(out.String(), "--- PASS"), strings.Count(out.String(), "--- SKIP"), strings.Count(out.String(), "--- FAIL")
	logf("probes in the VM: %d passed, %d skipped, %d failed in %s", passed, skipped, failed, time.Since(t0).Round(100*time.Millisecond))
	// Named on the last lines, which is what a CI log keeps.
	for _, line := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: "); ok {
			logf("failed in the VM: %s", name)
		}
	}
	want := len(strings.Split(cfg.probes, "|"))
	switch {
	case perr != nil:
		return fmt.Errorf("the probes failed in the VM: %w", perr)
	case skipped > 0 || passed < want:
		return fmt.Errorf("%d of the %d probes passed (%d skipped): each must run and pass", passed, want, skipped)
	}
	return nil
}

// sshRun runs script in the VM as its login, stdin from in, output to out
// (stderr without it).
func sshRun(ctx context.Context, cfg config, in io.Reader, script string, out ...io.Writer) error {
	cmd := exec.CommandContext(ctx, "ssh", "-F", cfg.sshConfig, "-o", "BatchMode=yes", cfg.host, script)
	cmd.Stdin = in
	cmd.Stderr = os.Stderr
	if len(out) > 0 {
		cmd.Stdout = out[0]
		cmd.Stderr = out[0]
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ssh %s %q: %w", cfg.host, firstLine(script), err)
	}
	return nil
}

// leftovers reports any container or network of the flock still on the VM's
// engine, and any credential in its state directory.
func leftovers(ctx context.Context, cfg config, engine *replay.Engine) error {
	var errs []error
	if cs, err := engine.ListContainers(ctx, replay.RunLabel+"=1"); err != nil || len(cs) > 0 {
		errs = append(errs, fmt.Errorf("containers left in the VM: %v %v", cs, err))
	}
	if ns, err := engine.ListNetworks(ctx, replay.RunLabel+"=1"); err != nil || len(ns) > 0 {
		errs = append(errs, fmt.Errorf("networks left in the VM: %v %v", ns, err))
	}
	var out strings.Builder
	if err := sshRun(ctx, cfg, nil, "sudo find /srv/flock/state/creds -mindepth 1 -name '*.nk'", &out); err != nil {
		errs = append(errs, err)
	} else if s := strings.TrimSpace(out.String()); s != "" {
		errs = append(errs, fmt.Errorf("credentials left in the VM: %s", s))
	}
	return errors.Join(errs...)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
