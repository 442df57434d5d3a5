package fargate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// How tasks meet (awsvpc): each task has a network namespace of its own,
// held by its pause container, and a network of its own (internal: no
// route anywhere), where it has its address. A task that may open
// connections to another (Model.Reach) finds that other in its own network:
// the other's pause container joins it, under its Cloud Map name while it is
// registered. So an agent's network holds the agent, the bus nodes and the
// gateway, and no other agent: agents never share a network. A task with a
// route out (Model.RouteOut) also joins the network standing for the
// internet.
//
// Cloud Map: a service's task registers (joins its clients' networks under
// <service>.<namespace>, which Docker's DNS then resolves there) once it is
// HEALTHY, as ECS registers a task whose health it reports; it leaves with
// the task.

// netMu serialises changes of who is in which network: a task joining its
// servers and a server registering with its clients must not miss each other.
var netMu sync.Mutex

// subnetPool hands out /28 subnets of a range for the tasks' networks.
type subnetPool struct {
	mu    sync.Mutex
	next  netip.Addr
	last  netip.Addr
	freed []netip.Prefix
}

func newSubnetPool(p netip.Prefix) *subnetPool {
	p = p.Masked()
	last := p.Addr()
	for i := 0; i < 1<<(32-p.Bits())-1; i++ {
		last = last.Next()
	}
	return &subnetPool{next: p.Addr(), last: last}
}

func (s *subnetPool) get() (netip.Prefix, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.freed); n > 0 {
		p := s.freed[n-1]
		s.freed = s.freed[:n-1]
		return p, nil
	}
	if !s.next.IsValid() || s.last.Less(s.next) {
		return netip.Prefix{}, fmt.Errorf("the replay's address pool is used up")
	}
	p := netip.PrefixFrom(s.next, 28)
	a := s.next
	for i := 0; i < 16; i++ {
		a = a.Next()
	}
	s.next = a
	return p, nil
}

func (s *subnetPool) put(p netip.Prefix) {
	s.mu.Lock()
	s.freed = append(s.freed, p)
	s.mu.Unlock()
}

// network gives task t its namespace (the pause container), its own
// network and address, the internet if it has a route out, and its servers.
func (c *Cluster) network(ctx context.Context, t *Task) error {
	subnet, err := c.nets.get()
	if err != nil {
		return err
	}
	gw := subnet.Addr().Next()
	id, err := c.e.CreateNetwork(ctx, map[string]any{
		"Name": "fargate-" + t.ID, "Driver": "bridge", "Internal": true, "CheckDuplicate": true,
		"IPAM":   map[string]any{"Driver": "default", "Config": []map[string]any{{"Subnet": subnet.String(), "Gateway": gw.String()}}},
		"Labels": labels(t, map[string]string{"ai-flock.fargate.subnet": subnet.String()}),
	})
	if err != nil {
		c.nets.put(subnet)
		return err
	}
	t.network = id
	pause, err := c.e.CreateContainer(ctx, "fargate-"+t.ID, map[string]any{
		"Image": c.pause, "Labels": labels(t, nil), "Hostname": "ip-" + strings.ReplaceAll(gw.Next().String(), ".", "-"),
		"HostConfig": map[string]any{"NetworkMode": "fargate-" + t.ID, "ReadonlyRootfs": true, "CapDrop": []string{"ALL"},
			"CgroupParent": cgroupParent(t.ID), "RestartPolicy": map[string]any{"Name": "no"}},
	})
	if err != nil {
		return err
	}
	t.pause = pause
	if err := c.e.Start(ctx, pause); err != nil {
		return err
	}
	doc, err := c.e.Inspect(ctx, pause)
	if err != nil {
		return err
	}
	nets, _ := doc["NetworkSettings"].(map[string]any)["Networks"].(map[string]any)
	ep, _ := nets["fargate-"+t.ID].(map[string]any)
	if t.Addr, err = netip.ParseAddr(replay.Str(ep["IPAddress"])); err != nil {
		return fmt.Errorf("pause container: no address on its network: %v", err)
	}
	pid, _ := doc["State"].(map[string]any)["Pid"].(float64)
	if pid <= 0 {
		return fmt.Errorf("pause container: no PID in %v", doc["State"])
	}
	if err := c.recordDNS(t, int(pid)); err != nil {
		return err
	}
	if c.m.RouteOut(t.At, -1) {
		if err := c.e.ConnectNetwork(ctx, c.internet, pause, map[string]any{}); err != nil {
			return fmt.Errorf("join the internet: %w", err)
		}
		t.joined = append(t.joined, c.internet)
	}

	netMu.Lock()
	defer netMu.Unlock()
	for _, s := range c.running(t) {
		if c.m.Reach(t.At, s.At) && (s.Registry == "" || s.registered) {
			if err := c.join(ctx, s, t); err != nil {
				return err
			}
		}
		// A server without a Cloud Map name is reached by address: it
		// joins its clients' networks as it starts.
		if t.Registry == "" && c.m.Reach(s.At, t.At) && s.network != "" {
			if err := c.join(ctx, t, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// running are the tasks with a namespace, other than t.
func (c *Cluster) running(t *Task) []*Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Task
	for _, o := range c.tasks {
		if o != t && o.pause != "" && o.State != StateStopped {
			out = append(out, o)
		}
	}
	return out
}

// join puts server s in client's network, under its Cloud Map name if it
// is registered.
func (c *Cluster) join(ctx context.Context, s, client *Task) error {
	ep := map[string]any{}
	if s.registered {
		ep["Aliases"] = []string{s.Registry}
	}
	err := c.e.ConnectNetwork(ctx, client.network, s.pause, ep)
	if err != nil && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s (%s) joins %s (%s): %w", s.ID, s.Def.Family, client.ID, client.Def.Family, err)
	}
	s.joined = append(s.joined, client.network)
	return nil
}

// register makes a healthy task findable under its Cloud Map name: it
// joins every client's network under that name.
func (c *Cluster) register(ctx context.Context, t *Task) error {
	netMu.Lock()
	defer netMu.Unlock()
	t.registered = true
	for _, cl := range c.running(t) {
		if cl.network != "" && c.m.Reach(cl.At, t.At) {
			if err := c.join(ctx, t, cl); err != nil {
				return err
			}
		}
	}
	c.opt.Log("task %s (%s) registered as %s", t.ID, t.Def.Family, t.Registry)
	return nil
}

// unnetwork takes t out of every network and removes its own network and
// namespace.
func (c *Cluster) unnetwork(ctx context.Context, t *Task) error {
	netMu.Lock()
	defer netMu.Unlock()
	var errs []error
	gone := func(err error) bool {
		return err == nil || replay.IsNotFound(err) || strings.Contains(err.Error(), "is not connected")
	}
	if t.pause != "" {
		for _, n := range t.joined {
			if err := c.e.DisconnectNetwork(ctx, n, t.pause); !gone(err) {
				errs = append(errs, err)
			}
		}
		t.joined = nil
	}
	if t.network != "" {
		if doc, err := c.e.InspectNetwork(ctx, t.network); err == nil {
			members, _ := doc["Containers"].(map[string]any)
			for id := range members {
				if id != t.pause {
					if err := c.e.DisconnectNetwork(ctx, t.network, id); !gone(err) {
						errs = append(errs, err)
					}
				}
			}
			if cfg, ok := doc["Labels"].(map[string]any); ok {
				if p, err := netip.ParsePrefix(replay.Str(cfg["ai-flock.fargate.subnet"])); err == nil {
					defer c.nets.put(p)
				}
			}
		}
	}
	if t.pause != "" {
		if err := c.e.Remove(ctx, t.pause); !gone(err) {
			errs = append(errs, err)
		}
		t.pause = ""
	}
	if t.network != "" {
		if err := c.e.RemoveNetwork(ctx, t.network); !gone(err) {
			errs = append(errs, err)
		}
		t.network = ""
	}
	return errors.Join(errs...)
}

// Cut takes every task of the service named from out of the networks of
// the service named to's tasks (as a network partition would), or back in
// (cut false): tests cut the bus off from agents without touching either.
func (c *Cluster) Cut(ctx context.Context, server, client string, cut bool) error {
	netMu.Lock()
	defer netMu.Unlock()
	c.mu.Lock()
	var servers, clients []*Task
	for _, t := range c.tasks {
		if t.State != StateRunning || t.pause == "" {
			continue
		}
		if t.Service == server {
			servers = append(servers, t)
		}
		if t.Service == client {
			clients = append(clients, t)
		}
	}
	c.mu.Unlock()
	for _, s := range servers {
		for _, cl := range clients {
			var err error
			if cut {
				err = c.e.DisconnectNetwork(ctx, cl.network, s.pause)
			} else {
				err = c.join(ctx, s, cl)
			}
			if err != nil && !strings.Contains(err.Error(), "is not connected") {
				return err
			}
		}
	}
	return nil
}
