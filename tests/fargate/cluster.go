package fargate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// Label marks everything the Fargate replay creates on the engine, so that
// a later run can remove what an interrupted one left.
const Label = "ai-flock.fargate"

// Options configure a replay.
type Options struct {
	// Root is the project root: relative build contexts start there.
	Root string
	// Work holds the file systems (EFS) and the tasks' own storage.
	Work string
	// Pool is the address range the tasks' networks are cut from (/28 each).
	Pool netip.Prefix
	// Poll is how often the service scheduler looks at its tasks.
	Poll time.Duration
	Log  func(format string, args ...any)
}

// Cluster is the replayed ECS cluster: the services of a captured aws
// stack, each run by a scheduler of its own.
type Cluster struct {
	e   *replay.Engine
	m   *Model
	opt Options

	images   map[string]string // image reference -> local image ID
	pause    string            // the pause image's ID
	internet string            // the network of the tasks with a route out

	mu       sync.Mutex
	tasks    map[string]*Task // every task not yet removed, by ID
	services map[string]*serviceRun
	nets     *subnetPool

	dnsMu       sync.Mutex
	lookups     map[string]*Lookup // by task, type and name
	lookupOrder []string
	order       []string // services in the order they were created

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New prepares a replay of m on e: it removes what an earlier run left,
// builds every image the task definitions run and the pause image, and
// creates the network of the tasks with a route out.
func New(ctx context.Context, e *replay.Engine, m *Model, opt Options) (*Cluster, error) {
	if opt.Log == nil {
		opt.Log = func(string, ...any) {}
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if !opt.Pool.IsValid() {
		opt.Pool = netip.MustParsePrefix("10.232.0.0/16")
	}
	if err := Clean(ctx, e); err != nil {
		return nil, fmt.Errorf("removing an earlier replay's leftovers: %w", err)
	}
	c := &Cluster{e: e, m: m, opt: opt, images: map[string]string{}, tasks: map[string]*Task{},
		services: map[string]*serviceRun{}, nets: newSubnetPool(opt.Pool), lookups: map[string]*Lookup{}}
	if err := c.buildImages(ctx); err != nil {
		return nil, err
	}
	var err error
	if c.pause, err = buildPause(ctx, e, opt.Root, opt.Work); err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}
	// The internet, as far as the replay goes: a routed bridge (not
	// internal) that tasks with a route out join, and where tests start
	// what the flock reaches outside (a fake model API).
	if c.internet, err = e.CreateNetwork(ctx, map[string]any{
		"Name": "flock-fargate-internet", "Driver": "bridge", "CheckDuplicate": true,
		"Labels": map[string]string{Label: "1", replay.RunLabel: "1"},
		// Public addresses, as the internet's are (the gateway's egress
		// broker refuses private ones): TEST-NET-2.
		"IPAM": map[string]any{"Driver": "default", "Config": []map[string]any{{"Subnet": InternetSubnet, "Gateway": "198.51.100.1"}}},
	}); err != nil {
		return nil, fmt.Errorf("internet network: %w", err)
	}
	return c, nil
}

// InternetSubnet is the replay's internet's range (TEST-NET-2).
const InternetSubnet = "198.51.100.0/24"

// Internet is the name of the network standing for the internet.
func (c *Cluster) Internet() string { return "flock-fargate-internet" }

// Model is what the cluster runs.
func (c *Cluster) Model() *Model { return c.m }

// buildImages builds every image resource of the capture (the user's own
// Dockerfiles first: an agent image is built FROM its base by tag).
func (c *Cluster) buildImages(ctx context.Context) error {
	built := map[string]string{}
	var rs []capture.Resource
	seen := map[string]bool{}
	for _, r := range c.m.Images {
		if !seen[r.Name] {
			seen[r.Name] = true
			rs = append(rs, r)
		}
	}
	// Base images (skipPush, built from the user's Dockerfile) before the
	// images built FROM them.
	sort.SliceStable(rs, func(i, j int) bool {
		bi, bj := strings.HasSuffix(rs[i].Name, "-base-image"), strings.HasSuffix(rs[j].Name, "-base-image")
		if bi != bj {
			return bi
		}
		return rs[i].Name < rs[j].Name
	})
	for _, r := range rs {
		start := time.Now()
		id, err := replay.BuildImage(ctx, c.e, c.opt.Root, r)
		if err != nil {
			return fmt.Errorf("image %s: %w", r.Name, err)
		}
		built[r.Name] = id
		c.opt.Log("built image %s in %s", r.Name, time.Since(start).Round(time.Millisecond))
	}
	for ref, r := range c.m.Images {
		c.images[ref] = built[r.Name]
	}
	return nil
}

// Up creates the services as `pulumi up` would: each once the services it
// depends on are created, and after those that wait for their steady state
// (the provider's waitForSteadyState: desired tasks RUNNING, one
// deployment) have reached it. It returns once every service is created.
func (c *Cluster) Up(ctx context.Context) error {
	run, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	created := map[string]chan struct{}{}
	for _, s := range c.m.Services {
		created[s.Resource] = make(chan struct{})
	}
	errs := make(chan error, len(c.m.Services))
	var wg sync.WaitGroup
	for _, s := range c.m.Services {
		wg.Add(1)
		go func(s *Service) {
			defer wg.Done()
			for _, dep := range s.After {
				select {
				case <-created[dep]:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
			sr := c.startService(run, s)
			if s.WaitSteady {
				if err := sr.waitSteady(ctx); err != nil {
					errs <- fmt.Errorf("service %s: %w", s.Name, err)
					return
				}
			}
			close(created[s.Resource])
		}(s)
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// WaitHealthy waits until every service's task is RUNNING and HEALTHY (or
// has no health check), or returns what each service that is not is doing.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var notYet []string
		c.mu.Lock()
		for _, name := range c.order {
			sr := c.services[name]
			if err := sr.fatal; err != nil {
				c.mu.Unlock()
				return fmt.Errorf("service %s: %w", sr.svc.Name, err)
			}
			if t := sr.task; t == nil || t.State != StateRunning || t.Health == HealthUnhealthy || (t.Health == HealthUnknown && t.hasHealthCheck()) {
				notYet = append(notYet, sr.describe())
			}
		}
		c.mu.Unlock()
		if len(notYet) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every task healthy after %s:\n  %s", timeout, strings.Join(notYet, "\n  "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Service is the state of the service with this ECS name: its current task
// and every task it ran.
func (c *Cluster) Service(name string) (current *Task, history []*Task, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, sr := range c.services {
		if sr.svc.Name == name {
			return sr.task, append([]*Task(nil), sr.history...), true
		}
	}
	return nil, nil, false
}

// Services are the ECS names of the services, in creation order.
func (c *Cluster) Services() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.order {
		out = append(out, c.services[n].svc.Name)
	}
	return out
}

// Down stops every service and task and removes what the replay created
// on the engine and on disk.
func (c *Cluster) Down(ctx context.Context) error {
	if c.stop != nil {
		c.stop()
	}
	c.wg.Wait()
	c.mu.Lock()
	var tasks []*Task
	for _, t := range c.tasks {
		tasks = append(tasks, t)
	}
	c.mu.Unlock()
	// Eight at a time: each stop waits up to its container's stopTimeout.
	var (
		errs []error
		emu  sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func(t *Task) {
			defer func() { <-sem; wg.Done() }()
			if err := c.stopTask(ctx, t, "the cluster is torn down"); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		}(t)
	}
	wg.Wait()
	if err := Clean(ctx, c.e); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(filepath.Join(c.opt.Work, "tasks")); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Clean removes every container and network a Fargate replay labelled,
// and the cgroups it made.
func Clean(ctx context.Context, e *replay.Engine) error {
	cs, err := e.ListContainers(ctx, Label+"=1")
	if err != nil {
		return err
	}
	for _, id := range cs {
		if err := e.Remove(ctx, id); err != nil && !replay.IsNotFound(err) && !replay.IsRemovalInProgress(err) {
			return err
		}
	}
	ns, err := e.ListNetworks(ctx, Label+"=1")
	if err != nil {
		return err
	}
	for _, id := range ns {
		if err := e.RemoveNetwork(ctx, id); err != nil && !replay.IsNotFound(err) {
			return err
		}
	}
	return removeCgroups("")
}
