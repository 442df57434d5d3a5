package busconfig

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

func model(t *testing.T, n int) flock.Model {
	m, err := flock.Config{Target: "docker", AgentCount: &n}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(t *testing.T, m flock.Model) PublicKeys {
	master := []byte(strings.Repeat("k", 32))
	op, _ := credentials.Derive(master, "operator")
	svc, _ := credentials.Derive(master, protocol.ServicesUser)
	k := PublicKeys{Operator: op.Public, Agents: map[string]string{}, Services: svc.Public}
	for _, a := range m.Agents {
		ak, err := credentials.Derive(master, protocol.AgentUser(a.ID))
		if err != nil {
			t.Fatal(err)
		}
		k.Agents[a.ID] = ak.Public
	}
	return k
}

// The rendered file is what the bus ships: the stock nats-server parser must
// load it as is, with one user per agent plus the operator and exactly the
// permissions the contract gives them.
// load is how nats-server reads conf from a file; t fails, naming what conf
// is, if it rejects it.
func load(t *testing.T, conf []byte, what string) *server.Options {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(p, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(p)
	if err != nil {
		t.Fatalf("nats-server rejects the rendered %s: %v", what, err)
	}
	return opts
}

func TestRenderedConfigLoadsInNatsServer(t *testing.T) {
	m := model(t, 3)
	k := keys(t, m)
	conf, err := Render(m, k, Options{MonitorHost: "10.210.0.2", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), `\u003e`) {
		t.Fatal(`rendered config escapes ">": nats-server rejects \u003e`)
	}
	opts := load(t, conf, "config")
	if len(opts.Nkeys) != 5 {
		t.Fatalf("%d nkey users, want 3 agents + operator + services", len(opts.Nkeys))
	}
	if opts.HTTPHost != "10.210.0.2" || opts.HTTPPort != protocol.MonitorPort || opts.Port != protocol.ClientPort || !opts.JetStream {
		t.Errorf("listen %d, monitor %s:%d, jetstream %v", opts.Port, opts.HTTPHost, opts.HTTPPort, opts.JetStream)
	}
	for _, u := range opts.Nkeys {
		if u.Nkey != k.Agents["agent-2"] {
			continue
		}
		want := AgentPermissions("agent-2")
		if !reflect.DeepEqual(u.Permissions.Publish.Allow, want.Publish.Allow) || !reflect.DeepEqual(u.Permissions.Subscribe.Allow, want.Subscribe.Allow) {
			t.Errorf("agent-2's permissions as loaded:\n%v\n%v", u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow)
		}
		for _, s := range u.Permissions.Subscribe.Allow {
			if strings.Contains(s, "agent-1") || s == "_INBOX.>" || s == ">" {
				t.Errorf("agent-2 may subscribe to %q", s)
			}
		}
		return
	}
	t.Fatal("agent-2's user is missing")
}

// The gateway's user, when given a key, may publish usage and use the
// ledger, and hear its own replies, the spans it exports and the agents'
// heartbeats, nothing else.
func TestGatewayUserPublishesUsageEgressAndLedgerOnly(t *testing.T) {
	m := model(t, 2)
	k := keys(t, m)
	gw, _ := credentials.Derive([]byte(strings.Repeat("k", 32)), protocol.GatewayUser)
	k.Gateway = gw.Public
	conf, err := Render(m, k, Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	opts := load(t, conf, "config")
	if len(opts.Nkeys) != 5 {
		t.Fatalf("%d nkey users, want 2 agents + operator + gateway + services", len(opts.Nkeys))
	}
	for _, u := range opts.Nkeys {
		if u.Nkey != gw.Public {
			continue
		}
		want := []string{"agent.*.usage", "agent.*.egress", "$KV.FLOCK_LEDGER.>", "$JS.API.STREAM.INFO.KV_FLOCK_LEDGER",
			"$JS.API.DIRECT.GET.KV_FLOCK_LEDGER.>", "$JS.API.STREAM.MSG.GET.KV_FLOCK_LEDGER"}
		if !reflect.DeepEqual(u.Permissions.Publish.Allow, want) ||
			!reflect.DeepEqual(u.Permissions.Subscribe.Allow, []string{"_INBOX.gateway.>", "flock.spans", "agent.*.heartbeat"}) {
			t.Errorf("the gateway's permissions as loaded:\n%v\n%v", u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow)
		}
		return
	}
	t.Fatal("the gateway's user is missing")
}

func TestRenderRefusesMissingKeys(t *testing.T) {
	m := model(t, 2)
	k := keys(t, m)
	delete(k.Agents, "agent-2")
	if _, err := Render(m, k, Options{}); err == nil || !strings.Contains(err.Error(), `no key for agent "agent-2"`) {
		t.Fatalf("got %v", err)
	}
}

func TestTopologyHasAConsumerPerAgentAndThePool(t *testing.T) {
	m := model(t, 3)
	raw, err := RenderTopology(m, Peers{})
	if err != nil {
		t.Fatal(err)
	}
	var top protocol.Topology
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	// Every peer of the bus is bounded by default (1 MiB/s, bursts of 4 MiB,
	// 8 connections), and none is uncounted unless the stack says so.
	if want := (protocol.PeerLimits{BytesPerSecond: 1 << 20, BurstBytes: 4 << 20, Connections: 8}); !reflect.DeepEqual(top.Peers, want) {
		t.Errorf("peer limits %+v, want %+v", top.Peers, want)
	}
	raw, err = RenderTopology(m, Peers{Uncounted: []netip.Prefix{netip.MustParsePrefix("10.210.0.9/29"), netip.MustParsePrefix("172.31.0.0/16")}, Unthrottled: []string{"UABC"}})
	if err != nil {
		t.Fatal(err)
	}
	var with protocol.Topology
	if err := json.Unmarshal(raw, &with); err != nil {
		t.Fatal(err)
	}
	if got, want := with.Peers.Uncounted, []string{"10.210.0.8/29", "172.31.0.0/16"}; !reflect.DeepEqual(got, want) {
		t.Errorf("uncounted peers %v, want %v", got, want)
	}
	if got, want := with.Peers.Unthrottled, []string{"UABC"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unthrottled users %v, want %v", got, want)
	}
	// The server's own limit leaves room beyond every agent's share.
	conf, err := Render(m, keys(t, m), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		MaxConn int `json:"max_connections"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		t.Fatal(err)
	}
	if c.MaxConn < 3*8+100 {
		t.Errorf("max_connections %d: 3 agents of 8 connections leave the operator and services too little", c.MaxConn)
	}
	got := map[string][]string{}
	mail := map[string]bool{}
	for _, c := range top.Consumers {
		if c.Stream != protocol.StreamTasks {
			mail[c.Stream+"/"+c.Config.Durable] = true
			continue
		}
		f := c.Config.FilterSubjects
		if c.Config.FilterSubject != "" {
			f = []string{c.Config.FilterSubject}
		}
		got[c.Config.Durable] = f
	}
	want := map[string][]string{
		"agent-1": {"tasks.agent-1", "tasks.all", "tasks.pool.agent-1"}, "agent-2": {"tasks.agent-2", "tasks.all", "tasks.pool.agent-2"},
		"agent-3": {"tasks.agent-3", "tasks.all", "tasks.pool.agent-3"}, "pool": {"tasks.pool"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("consumers %v, want %v", got, want)
	}
	// And each agent's mailbox, and the operator's share beside it, has the
	// one consumer its agent pulls.
	wantMail := map[string]bool{}
	for _, a := range m.Agents {
		wantMail[protocol.MailStream(a.ID)+"/"+protocol.MailConsumer] = true
		wantMail[protocol.OperatorMailStream(a.ID)+"/"+protocol.MailConsumer] = true
	}
	if !reflect.DeepEqual(mail, wantMail) {
		t.Fatalf("mailbox consumers %v, want %v", mail, wantMail)
	}
	// The bus hands out the pool: it knows each agent's slots and timeout.
	if len(top.Pool.Agents) != 3 || top.Pool.Agents[1].ID != "agent-2" || top.Pool.Agents[1].Slots != m.Agents[1].Limits.Concurrency ||
		time.Duration(top.Pool.Agents[1].TaskTimeout) != m.Agents[1].Limits.TaskTimeout || time.Duration(top.Pool.Grace) != PoolGrace {
		t.Fatalf("pool %+v", top.Pool)
	}
}

// A three-node bus: each node's config names it apart, listens for routes on
// the host it is given, routes to the two others (not itself), and keeps
// the cluster's addresses from clients; every stream has three replicas.
func TestClusteredNodeConfigLoadsInNatsServer(t *testing.T) {
	three := 3
	n := 2
	m, err := flock.Config{Target: "docker", AgentCount: &n, Bus: flock.BusConfig{Replicas: &three}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"10.210.0.66", "10.210.0.67", "10.210.0.68"}
	conf, err := Render(m, keys(t, m), Options{StoreDir: t.TempDir(), Node: 2, RouteHost: hosts[1], Routes: hosts})
	if err != nil {
		t.Fatal(err)
	}
	opts := load(t, conf, "node config")
	if opts.ServerName != "flock-bus-2" || opts.Cluster.Name != "flock-bus" || opts.Cluster.Host != hosts[1] || opts.Cluster.Port != protocol.RoutePort || !opts.Cluster.NoAdvertise {
		t.Errorf("node 2: server %q, cluster %q on %s:%d, no_advertise %v", opts.ServerName, opts.Cluster.Name, opts.Cluster.Host, opts.Cluster.Port, opts.Cluster.NoAdvertise)
	}
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Host)
	}
	if want := []string{"10.210.0.66:6222", "10.210.0.68:6222"}; !reflect.DeepEqual(routes, want) {
		t.Errorf("node 2 routes to %v, want %v", routes, want)
	}
	for _, sc := range BuildTopology(m, Peers{}).Streams {
		if sc.Replicas != 3 {
			t.Errorf("stream %s has %d replicas, want 3", sc.Name, sc.Replicas)
		}
	}
	for _, bad := range []Options{
		{Node: 0, RouteHost: hosts[0], Routes: hosts},
		{Node: 4, RouteHost: hosts[0], Routes: hosts},
		{Node: 1, RouteHost: hosts[0], Routes: hosts[:2]},
		{Node: 1, Routes: hosts},
	} {
		if _, err := Render(m, keys(t, m), bad); err == nil {
			t.Errorf("Render(%+v) of a 3-node bus: no error", bad)
		}
	}
	// One node: no cluster block, one replica.
	single := model(t, 2)
	conf, err = Render(single, keys(t, single), Options{})
	if err != nil || strings.Contains(string(conf), `"cluster"`) {
		t.Errorf("single node config has a cluster block (%v)", err)
	}
	if r := BuildTopology(single, Peers{}).Streams[0].Replicas; r != 1 {
		t.Errorf("single node stream replicas %d", r)
	}
}

// The board: its bucket (replicated like the streams, bounded), what the
// board service knows of each agent (its labels, from the model, never from
// the agent), and who may ask it: each agent on its own request subjects
// only, the operator on the operator's. Agents may not touch the bucket or
// watch the board's events; they hear the ready bell.
func TestBoardBucketAgentsAndPermissions(t *testing.T) {
	m := model(t, 2)
	m.Agents[1].Labels = []string{"gpu", "go"}
	m.Board = flock.Board{ClaimLimit: 2, AddQuota: 0} // 0: no subtasks, not "the default"
	top := BuildTopology(m, Peers{})
	var bucket *jetstream.KeyValueConfig
	for i, kc := range top.KeyValues {
		if kc.Bucket == protocol.BoardBucket {
			bucket = &top.KeyValues[i]
		}
	}
	if bucket == nil {
		t.Fatalf("no %s bucket in %+v", protocol.BoardBucket, top.KeyValues)
	}
	if bucket.History != 1 || bucket.Storage != jetstream.FileStorage || bucket.Replicas != m.Bus.Replicas ||
		bucket.MaxBytes != protocol.BoardBucketBytes || bucket.MaxValueSize != protocol.BoardValueBytes {
		t.Errorf("board bucket %+v", *bucket)
	}
	none := 0
	want := protocol.BoardConfig{Agents: []protocol.BoardAgent{
		{ID: "agent-1", Labels: m.Agents[0].Labels, ClaimLimit: 2, AddQuota: &none},
		{ID: "agent-2", Labels: []string{"gpu", "go"}, ClaimLimit: 2, AddQuota: &none},
	}}
	if !reflect.DeepEqual(top.Board, want) {
		t.Errorf("board config %+v, want %+v", top.Board, want)
	}

	p := AgentPermissions("agent-1")
	if !slices.Contains(p.Publish.Allow, "board.agent.agent-1.*") || !slices.Contains(p.Subscribe.Allow, protocol.SubjectBoardReady) {
		t.Errorf("agent-1 cannot ask the board or hear it: %v / %v", p.Publish.Allow, p.Subscribe.Allow)
	}
	for _, s := range p.Publish.Allow {
		if strings.HasPrefix(s, "$KV.") || strings.HasPrefix(s, "board.operator") || (strings.HasPrefix(s, "board.") && s != "board.agent.agent-1.*") {
			t.Errorf("agent-1 may publish on %q", s)
		}
	}
	for _, s := range p.Subscribe.Allow {
		if strings.HasPrefix(s, "board.") && s != protocol.SubjectBoardReady {
			t.Errorf("agent-1 may subscribe to %q", s)
		}
	}
	op := OperatorPermissions()
	if !slices.Contains(op.Publish.Allow, "board.operator.*") || !slices.Contains(op.Subscribe.Allow, "board.events.>") || !slices.Contains(op.Subscribe.Allow, "board.ready") {
		t.Errorf("operator's board permissions: %v / %v", op.Publish.Allow, op.Subscribe.Allow)
	}
	for _, s := range op.Publish.Allow {
		if strings.HasPrefix(s, "board.agent") || strings.HasPrefix(s, "$KV."+protocol.BoardBucket) {
			t.Errorf("the operator may publish on %q", s)
		}
	}
}
