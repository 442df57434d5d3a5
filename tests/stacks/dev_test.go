package stacks_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

func dev(t testing.TB, overrides capture.Config) *capture.Stack {
	t.Helper()
	return captured(t, "dev", overrides)
}

// captured is the named stack (Pulumi.<stack>.yaml) under the mock engine,
// with overrides; t fails if it does not capture.
func captured(t testing.TB, stack string, overrides capture.Config) *capture.Stack {
	t.Helper()
	s, err := capture.RunStack(stack, overrides)
	if err != nil {
		t.Fatalf("%s stack: %v", stack, err)
	}
	return s
}

func count(n int) capture.Config { return capture.Config{"flock:agentCount": strconv.Itoa(n)} }

// replicas sets flock:bus.replicas on c.
func replicas(c capture.Config, r int) capture.Config {
	c["flock:bus"] = fmt.Sprintf(`{"replicas": %d}`, r)
	return c
}

// busNode is what the dev stack calls bus node k of r (names, addresses).
type busNode struct{ k, r int }

func (b busNode) container() string {
	if b.r == 1 {
		return "flock-bus"
	}
	return fmt.Sprintf("flock-bus-%d", b.k)
}

func (b busNode) alias() string {
	if b.r == 1 {
		return "bus"
	}
	return fmt.Sprintf("bus-%d", b.k)
}

func (b busNode) link(agent string) string {
	if b.r == 1 {
		return "flock-" + agent + "-bus-link"
	}
	return fmt.Sprintf("flock-%s-bus-%d-link", agent, b.k)
}

// nodes lists the r bus nodes.
func nodes(r int) []busNode {
	var out []busNode
	for k := 1; k <= r; k++ {
		out = append(out, busNode{k, r})
	}
	return out
}

// plus is the address k after a.
func plus(a netip.Addr, k int) netip.Addr {
	for range k {
		a = a.Next()
	}
	return a
}

// agentContainers returns the agent containers keyed by agent ID.
func agentContainers(t testing.TB, s *capture.Stack) map[string]capture.Resource {
	out := map[string]capture.Resource{}
	for _, c := range s.ByType(capture.TypeContainer) {
		if label(c, "ai-flock.role") == "agent" {
			out[label(c, "ai-flock.agent")] = c
		}
	}
	return out
}

func label(r capture.Resource, key string) string {
	for _, l := range list(r, "labels") {
		m := l.(map[string]any)
		if m["label"] == key {
			return m["value"].(string)
		}
	}
	return ""
}

// networksJoined is what a container joins, as network@address in its order.
func networksJoined(c capture.Resource) []string {
	var joined []string
	for _, n := range list(c, "networksAdvanced") {
		m := n.(map[string]any)
		joined = append(joined, fmt.Sprint(m["name"], "@", m["ipv4Address"]))
	}
	return joined
}

func list(r capture.Resource, key string) []any {
	v, _ := r.Plain()[key].([]any)
	return v
}

func obj(r capture.Resource, key string) map[string]any {
	v, _ := r.Plain()[key].(map[string]any)
	return v
}

func num(r capture.Resource, key string) float64 {
	v, _ := r.Plain()[key].(float64)
	return v
}

func boolean(r capture.Resource, key string) bool {
	v, _ := r.Plain()[key].(bool)
	return v
}

func TestDevStackInvariants(t *testing.T) {
	for _, n := range []int{3, 50} {
		for _, r := range []int{1, 3} {
			t.Run(fmt.Sprintf("%d agents, %d bus nodes", n, r), func(t *testing.T) {
				s := dev(t, replicas(count(n), r))
				agents := agentContainers(t, s)
				if len(agents) != n {
					t.Fatalf("declared %d agent containers, want %d", len(agents), n)
				}
				checkAgentContainers(t, s, agents)
				checkNetworks(t, s, agents, r)
				checkMounts(t, s, agents)
				checkProcessLimits(t, s, agents, r)
				checkBus(t, s, n, r)
			})
		}
	}
}

var tmpfsOpts = regexp.MustCompile(`(^|,)noexec(,|$)`)

func checkAgentContainers(t *testing.T, s *capture.Stack, agents map[string]capture.Resource) {
	uids := map[string]string{}
	for id, c := range agents {
		user := c.String("user")
		uid, gid, ok := strings.Cut(user, ":")
		if !ok || uid == "0" || uid == "" || gid == "0" {
			t.Errorf("%s: user %q: must be an explicit non-root uid:gid", id, user)
		}
		if n, _ := strconv.Atoi(uid); n < 1000 {
			t.Errorf("%s: uid %s is a system UID", id, uid)
		}
		if other, dup := uids[uid]; dup {
			t.Errorf("%s and %s share UID %s", id, other, uid)
		}
		uids[uid] = id
		if !boolean(c, "readOnly") {
			t.Errorf("%s: root filesystem is not read-only", id)
		}
		tmpfs := obj(c, "tmpfs")
		if len(tmpfs) != 2 {
			t.Errorf("%s: tmpfs %v: want exactly /tmp and /run", id, tmpfs)
		}
		for _, dir := range []string{"/tmp", "/run"} {
			o, _ := tmpfs[dir].(string)
			if !tmpfsOpts.MatchString(o) || !strings.Contains(o, "nosuid") || !strings.Contains(o, "size=") {
				t.Errorf("%s: tmpfs %s options %q: want noexec, nosuid and a size", id, dir, o)
			}
			if !strings.Contains(o, "uid="+uid+",gid="+gid+",mode=0700") {
				t.Errorf("%s: tmpfs %s options %q: want it owned by the agent alone (uid/gid/mode=0700)", id, dir, o)
			}
		}
		caps := obj(c, "capabilities")
		if !reflect.DeepEqual(caps["drops"], []any{"ALL"}) || len(asList(caps["adds"])) != 0 {
			t.Errorf("%s: capabilities %v: want drop ALL, add none", id, caps)
		}
		opts := list(c, "securityOpts")
		if !slices.Contains(opts, "no-new-privileges:true") {
			t.Errorf("%s: securityOpts %v lack no-new-privileges:true", id, opts)
		}
		for _, o := range opts {
			if strings.Contains(o.(string), "unconfined") {
				t.Errorf("%s: securityOpt %q disables a confinement", id, o)
			}
		}
		if boolean(c, "privileged") {
			t.Errorf("%s: privileged", id)
		}
		for _, k := range []string{"networkMode", "pidMode", "ipcMode", "usernsMode", "cgroupParent"} {
			if v := c.String(k); v != "" {
				t.Errorf("%s: %s = %q: must be left to the engine's private default", id, k, v)
			}
		}
		if len(list(c, "devices")) != 0 || len(list(c, "ports")) != 0 || len(list(c, "volumes")) != 0 || boolean(c, "publishAllPorts") {
			t.Errorf("%s: devices, ports or volumes declared: %v %v %v", id, list(c, "devices"), list(c, "ports"), list(c, "volumes"))
		}
		if mem, swap := num(c, "memory"), num(c, "memorySwap"); mem < 32 || swap != mem {
			t.Errorf("%s: memory %v MiB, memorySwap %v: want a limit and swap equal to it", id, mem, swap)
		}
		if cpus, err := strconv.ParseFloat(c.String("cpus"), 64); err != nil || cpus <= 0 {
			t.Errorf("%s: cpus %q: want a CPU quota", id, c.String("cpus"))
		}
		if sh := num(c, "cpuShares"); sh == 0 || sh == 1024 {
			t.Errorf("%s: cpuShares %v: CIS 5.11 wants a deliberate CPU priority", id, sh)
		}
		if !boolean(c, "init") {
			t.Errorf("%s: no init process", id)
		}
		if r := c.String("restart"); r != "on-failure" || num(c, "maxRetryCount") < 1 || num(c, "maxRetryCount") > 5 {
			t.Errorf("%s: restart %q max %v: CIS 5.15 wants on-failure with at most 5 retries", id, r, num(c, "maxRetryCount"))
		}
		hc := obj(c, "healthcheck")
		if tests := asList(hc["tests"]); len(tests) < 2 || tests[0] != "CMD" {
			t.Errorf("%s: healthcheck %v: want an exec-form test", id, hc)
		}
		if lo := obj(c, "logOpts"); c.String("logDriver") != "json-file" || lo["max-size"] == nil || lo["max-file"] == nil {
			t.Errorf("%s: logs are not bounded: driver %q opts %v", id, c.String("logDriver"), lo)
		}
		env := strings.Join(toStrings(list(c, "envs")), "\n")
		if strings.Contains(env, "SU") && regexp.MustCompile(`=SU[A-Z2-7]{50,}`).MatchString(env) {
			t.Errorf("%s: an nkey seed is in the container environment", id)
		}
	}
}

func checkNetworks(t *testing.T, s *capture.Stack, agents map[string]capture.Resource, r int) {
	nets := map[string]capture.Resource{}
	for _, n := range s.ByType(capture.TypeNetwork) {
		nets[n.String("name")] = n
	}
	subnets := map[string]string{}
	for id, c := range agents {
		attached := list(c, "networksAdvanced")
		if len(attached) != 1 {
			t.Fatalf("%s: attached to %d networks, want exactly its own", id, len(attached))
		}
		name := attached[0].(map[string]any)["name"].(string)
		n, ok := nets[name]
		if !ok {
			t.Fatalf("%s: network %q is not declared by the flock", id, name)
		}
		if label(n, "ai-flock.agent") != id {
			t.Errorf("%s: joins network %s which belongs to %q", id, name, label(n, "ai-flock.agent"))
		}
		if !boolean(n, "internal") {
			t.Errorf("%s: network %s is not internal", id, name)
		}
		if obj(n, "options")["com.docker.network.bridge.inhibit_ipv4"] != "true" {
			t.Errorf("%s: network %s puts a gateway address on the host bridge", id, name)
		}
		ipam := list(n, "ipamConfigs")
		if len(ipam) != 1 {
			t.Fatalf("%s: network %s: want one explicit subnet, got %v", id, name, ipam)
		}
		subnet := ipam[0].(map[string]any)["subnet"].(string)
		p, err := netip.ParsePrefix(subnet)
		if err != nil || !netip.MustParsePrefix("10.210.0.0/16").Contains(p.Addr()) {
			t.Errorf("%s: subnet %q outside the configured pool", id, subnet)
		}
		if other, dup := subnets[subnet]; dup {
			t.Errorf("%s and %s share subnet %s", id, other, subnet)
		}
		subnets[subnet] = id
		// Nothing but this agent (and the bus, joined by its link step) is on it.
		for other, oc := range agents {
			if other != id && list(oc, "networksAdvanced")[0].(map[string]any)["name"] == name {
				t.Errorf("%s shares network %s with %s", other, name, id)
			}
		}
		// Every bus node joins at a fixed address (.2, .3, .4), and the agent
		// is given all of them.
		var urls []string
		for _, b := range nodes(r) {
			busIP := plus(p.Addr(), 1+b.k).String()
			link, ok := s.Get(capture.TypeCommand, b.link(id))
			if !ok || !strings.Contains(link.String("create"), "network connect --ip "+busIP+" --alias "+b.alias()+" "+name+" "+b.container()+" ") {
				t.Errorf("%s: no step joins bus node %d to %s at %s: %q", id, b.k, name, busIP, link.String("create"))
			}
			urls = append(urls, "nats://"+busIP+":4222")
		}
		if env := toStrings(list(agents[id], "envs")); !slices.Contains(env, "NATS_URL="+strings.Join(urls, ",")) {
			t.Errorf("%s: does not reach every bus node at its fixed address %v: %v", id, urls, env)
		}
		// The agent's address is fixed too, after theirs: its container does
		// not wait for the links, so the engine must not give it a node's.
		ip, _ := attached[0].(map[string]any)["ipv4Address"].(string)
		if want := plus(p.Addr(), 2+r).String(); ip != want {
			t.Errorf("%s: address %q on its network, want the fixed %s after the bus nodes'", id, ip, want)
		}
		if dns := list(agents[id], "dns"); len(dns) != 1 || dns[0] != "127.0.0.1" {
			t.Errorf("%s: dns %v: the embedded resolver must have no upstream to forward to", id, dns)
		}
	}
}

func checkMounts(t *testing.T, s *capture.Stack, agents map[string]capture.Resource) {
	root := "/srv/flock/shared"
	for id, c := range agents {
		got := map[string]string{}
		for _, m := range list(c, "mounts") {
			mm := m.(map[string]any)
			mode := "rw"
			if mm["readOnly"] == true {
				mode = "ro"
			}
			if mm["type"] != "bind" {
				t.Errorf("%s: mount %v is not a bind mount", id, mm)
			}
			if p := asMap(mm["bindOptions"])["propagation"]; p == "shared" || p == "rshared" {
				t.Errorf("%s: mount %v propagates to the host", id, mm)
			}
			got[mm["target"].(string)] = mm["source"].(string) + " " + mode
		}
		want := map[string]string{
			"/shared/agents/" + id:        root + "/agents/" + id + " rw",
			"/shared/common":              root + "/common ro",
			"/shared/logs/" + id + ".log": root + "/logs/" + id + "/" + id + ".log rw",
			protocol.ContainerCredsDir:    "/srv/flock/state/creds/" + id + " ro",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: mounts\n got %v\nwant %v", id, got, want)
		}
		for _, src := range got {
			if strings.Contains(src, "docker.sock") || src == root+" rw" || src == root+" ro" {
				t.Errorf("%s: mounts %q", id, src)
			}
		}
		prep, ok := s.Get(capture.TypeCommand, "flock-"+id+"-prepare")
		if !ok {
			t.Fatalf("%s: no prepare step", id)
		}
		if !prep.Inputs["stdin"].IsSecret() {
			t.Errorf("%s: the prepare script carries the agent's seed but is not a secret", id)
		}
		if got, want := label(c, "ai-flock.disk-mib"), fmt.Sprint(flock.DefaultLimits.DiskMiB); got != want {
			t.Errorf("%s: label ai-flock.disk-mib = %q, want %s (a new size must recreate the container)", id, got, want)
		}
		uid := strings.Split(c.String("user"), ":")[0]
		script := prep.String("stdin")
		for _, want := range []string{
			// The host library the layout step installed, checked, then its quota filesystems.
			"sha256sum -c --status",
			"\n. /srv/flock/state/lib/agent-prepare.sh\n",
			fmt.Sprintf("flock_disk %s/agents/%s /srv/flock/state/disks/%s.img %d %s %s diskMiB\n", root, id, id, flock.DefaultLimits.DiskMiB<<20, uid, uid),
			fmt.Sprintf("flock_disk %s/logs/%s /srv/flock/state/disks/%s.log.img %d 0 0 ", root, id, id, flock.LogDiskMiB<<20),
			fmt.Sprintf("chown %s:%s \"$dir\"\nchmod 0700 \"$dir\"", uid, uid),
			fmt.Sprintf("chown -h %s:%s \"$log\"\nchmod 0600", uid, uid),
			fmt.Sprintf("chmod 0400 /srv/flock/state/creds/%s/nats.nk.new", id),
		} {
			if !strings.Contains(script, want) {
				t.Errorf("%s: prepare script lacks %q", id, want)
			}
		}
	}
	layout, _ := s.Get(capture.TypeCommand, "flock-host-layout")
	if !strings.Contains(layout.String("stdin"), "-m 0711 "+root+"/agents "+root+"/logs") {
		t.Errorf("the agents and logs roots are not traverse-only: %q", layout.String("stdin"))
	}
	// The library every prepare step sources: root's, and its filesystems
	// zeroed up front (see TestAgentDiskQuota).
	for _, want := range []string{
		"install -d -o 0 -g 0 -m 0700 /srv/flock/state/lib\numask 077\n",
		"cat > /srv/flock/state/lib/agent-prepare.sh.new <<'FLOCK_EOF'\n",
		"mkfs.ext4 -q -F -m 0 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0,root_owner=$owner \"$img.new\"",
		"mount -o loop,nosuid,nodev,noinit_itable \"$img\" \"$dir\"",
		"mv -f /srv/flock/state/lib/agent-prepare.sh.new /srv/flock/state/lib/agent-prepare.sh\n",
	} {
		if !strings.Contains(layout.String("stdin"), want) {
			t.Errorf("the host layout step lacks %q", want)
		}
	}
}

func checkProcessLimits(t *testing.T, s *capture.Stack, agents map[string]capture.Resource, r int) {
	for id, c := range agents {
		var nproc float64
		for _, u := range list(c, "ulimits") {
			if m := u.(map[string]any); m["name"] == "nproc" {
				nproc = m["hard"].(float64)
			}
		}
		if nproc < 16 {
			t.Errorf("%s: no nproc ulimit", id)
		}
		// The first bus node's link step sets it, once the container exists.
		step, ok := s.Get(capture.TypeCommand, nodes(r)[0].link(id))
		if !ok {
			t.Fatalf("%s: no step sets the cgroup PIDs limit", id)
		}
		if want := fmt.Sprintf(" && docker update --pids-limit %d flock-%s >/dev/null", int(nproc), id); !strings.HasSuffix(step.String("create"), want) {
			t.Errorf("%s: pids step %q, want %q", id, step.String("create"), want)
		}
		// Re-run whenever the container is replaced: its ID is a trigger.
		triggers := step.Inputs["triggers"]
		if !triggers.IsArray() || len(triggers.ArrayValue()) == 0 || !dependsOn(step, c) {
			t.Errorf("%s: the pids step is not tied to the container (triggers %v)", id, triggers)
		}
	}
}

func checkBus(t *testing.T, s *capture.Stack, n, r int) {
	cfg, _ := s.Get(capture.TypeCommand, "flock-bus-config")
	script := cfg.String("stdin")
	if regexp.MustCompile(`SU[A-Z2-7]{50,}`).MatchString(script) {
		t.Errorf("bus config holds a seed")
	}
	stores := map[string]string{}
	for _, b := range nodes(r) {
		bus, ok := s.Get(capture.TypeContainer, b.container())
		if !ok {
			t.Fatalf("no bus container %s", b.container())
		}
		if u := bus.String("user"); strings.HasPrefix(u, "0:") || u == "" {
			t.Errorf("%s runs as %q", b.container(), u)
		}
		if !boolean(bus, "readOnly") || !reflect.DeepEqual(obj(bus, "capabilities")["drops"], []any{"ALL"}) || num(bus, "memory") == 0 {
			t.Errorf("%s is not hardened like the agents", b.container())
		}
		var published []string
		for _, p := range list(bus, "ports") {
			pm := p.(map[string]any)
			if pm["ip"] != "127.0.0.1" {
				t.Errorf("%s publishes %v beyond loopback", b.container(), pm)
			}
			published = append(published, fmt.Sprintf("%v->%v", pm["external"], pm["internal"]))
		}
		// The metrics relay listens on the node's bus-network address only
		// (agents reach the bus on their own networks), as monitoring does.
		busIP, _ := list(bus, "networksAdvanced")[0].(map[string]any)["ipv4Address"].(string)
		if env := toStrings(list(bus, "envs")); busIP == "" || !slices.Contains(env, protocol.EnvBusMetricsListen+"="+busIP+":9464") {
			t.Errorf("%s: the metrics relay does not listen on its bus address %q only: %v", b.container(), busIP, env)
		}
		// Node k's client, monitoring and metrics ports on the host:
		// 4222+k-1, 8222+k-1, 9464+k-1.
		if want := []string{fmt.Sprintf("%d->4222", 4221+b.k), fmt.Sprintf("%d->8222", 8221+b.k), fmt.Sprintf("%d->9464", 9463+b.k)}; !reflect.DeepEqual(published, want) {
			t.Errorf("%s ports %v: want %v (the operator, monitoring and metrics ports only)", b.container(), published, want)
		}
		// The bus gets a real cgroup PIDs limit too (CIS 5.29), tied to its container.
		pidsStep := strings.TrimPrefix(b.container(), "flock-")
		step, ok := s.Get(capture.TypeCommand, "flock-"+pidsStep+"-pids-limit")
		if !ok || !strings.Contains(step.String("create"), "docker update --pids-limit 512 "+b.container()) || !dependsOn(step, bus) {
			t.Errorf("%s: no PIDs-limit step tied to its container: %q", b.container(), step.String("create"))
		}
		// Its own store.
		for _, m := range list(bus, "mounts") {
			mm := m.(map[string]any)
			if mm["target"] == protocol.BusStoreDir {
				src := mm["source"].(string)
				if other, dup := stores[src]; dup {
					t.Errorf("%s and %s share the store %s", b.container(), other, src)
				}
				stores[src] = b.container()
			}
		}
		// Monitoring (and a cluster's routes) on its bus-network address only.
		addr := fmt.Sprintf("10.210.0.%d", 1+b.k)
		if !strings.Contains(script, `"http": "`+addr+`:8222"`) {
			t.Errorf("bus config: node %d's monitoring must listen on %s only", b.k, addr)
		}
		if r > 1 && !strings.Contains(script, `"listen": "`+addr+`:6222"`) {
			t.Errorf("bus config: node %d's routes must listen on %s only", b.k, addr)
		}
	}
	if len(stores) != r {
		t.Errorf("%d bus stores for %d nodes: %v", len(stores), r, stores)
	}
	links := 0
	for _, c := range s.ByType(capture.TypeCommand) {
		if strings.HasSuffix(c.Name, "-link") && strings.Contains(c.Name, "-bus") {
			links++
		}
	}
	if links != (n+1)*r {
		t.Errorf("%d bus links, want one per agent (and the services) and bus node (%d)", links, (n+1)*r)
	}
	// Containers talk to each other on the bus network only when there are
	// routes to carry.
	busNet, _ := s.Get(capture.TypeNetwork, "flock-bus-net")
	if icc := obj(busNet, "options")["com.docker.network.bridge.enable_icc"]; icc != strconv.FormatBool(r > 1) {
		t.Errorf("bus network enable_icc %v with %d nodes", icc, r)
	}
	if r > 1 && strings.Count(script, "docker kill -s HUP flock-bus-") != r {
		t.Errorf("bus config step does not reload every node: %q", script)
	}
}

// dependsOn reports whether step lists c (by URN) among its dependencies.
func dependsOn(step, c capture.Resource) bool {
	for _, d := range step.Deps {
		if strings.HasSuffix(d, "::"+c.Name) {
			return true
		}
	}
	return false
}

func asList(v any) []any         { l, _ := v.([]any); return l }
func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func toStrings(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// Operators get what they need from the outputs, and nothing secret in plain text.
func TestDevStackOutputs(t *testing.T) {
	s := dev(t, count(3))
	if got := s.Outputs["busUrl"].Value; got != "nats://127.0.0.1:4222" {
		t.Errorf("busUrl = %v", got)
	}
	agents, _ := s.Outputs["agents"].Value.([]any)
	if len(agents) != 3 {
		t.Fatalf("agents output: %v", s.Outputs["agents"].Value)
	}
	a1 := agents[0].(map[string]any)
	if a1["id"] != "agent-1" || fmt.Sprint(a1["uid"]) != "20001" || a1["dir"] != "/srv/flock/shared/agents/agent-1" || a1["logFile"] != "/srv/flock/shared/logs/agent-1/agent-1.log" {
		t.Errorf("agent-1 output: %v", a1)
	}
	seed := regexp.MustCompile(`SU[A-Z2-7]{50,}`)
	for name, o := range s.Outputs {
		if !o.Secret && seed.MatchString(fmt.Sprint(o.Value)) {
			t.Errorf("output %s holds a seed in plain text", name)
		}
	}
}

// Destroying the flock (or removing an agent) takes each agent's key off the
// host: its prepare step's delete removes exactly its own key file, holds no
// seed (a delete step's command is plain state), and reads no stdin (the
// provider hands a delete its create's stdin: the secret script).
func TestDevDeleteStepsRemoveKeysAndImages(t *testing.T) {
	s := dev(t, nil)
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		prep, ok := s.Get(capture.TypeCommand, "flock-"+id+"-prepare")
		if !ok {
			t.Fatalf("%s: no prepare step", id)
		}
		del := prep.String("delete")
		key := "/srv/flock/state/creds/" + id
		if !strings.Contains(del, "rm -rf "+key+";") || !strings.Contains(del, "</dev/null") {
			t.Errorf("%s: delete step %q does not remove %s with stdin closed", id, del, key)
		}
		if strings.Contains(del, "SU") || strings.Contains(del, "creds/agent-"+other(id)) {
			t.Errorf("%s: delete step %q holds a seed or names another agent's key", id, del)
		}
	}
	cleanup, ok := s.Get(capture.TypeCommand, "flock-images-cleanup")
	if !ok || !strings.Contains(cleanup.String("delete"), "docker image rm -f ai-flock/flock-agent:latest ai-flock/flock-bus:latest") {
		t.Fatalf("no step removes the images on destroy: %+v", cleanup.Inputs)
	}
	for _, c := range s.ByType(capture.TypeContainer) {
		found := false
		for _, d := range c.Deps {
			found = found || strings.HasSuffix(d, "::flock-images-cleanup")
		}
		if !found {
			t.Errorf("%s does not depend on the images cleanup: its delete could run first", c.Name)
		}
	}
}

func other(id string) string {
	if id == "agent-1" {
		return "2"
	}
	return "1"
}
