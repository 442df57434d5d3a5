package stacks_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's invariants (TestAWSStackInvariants, aws_test.go): the cluster, task definitions and services.

func checkAWSCluster(t *testing.T, s *capture.Stack, b awsBus) {
	c := awsGet(t, s, awsrules.TypeCluster, "flock-cluster")
	if !reflect.DeepEqual(list(c, "settings"), []any{map[string]any{"name": "containerInsights", "value": "enabled"}}) {
		t.Errorf("cluster settings %v: want Container Insights", list(c, "settings"))
	}
	ns := awsGet(t, s, awsrules.TypeNamespace, "flock-namespace")
	if ns.String("name") != "flock.flock.internal" || ns.String("vpc") != capture.MockID("flock-vpc") {
		t.Errorf("namespace %v: want flock.flock.internal in the flock's VPC", ns.Inputs)
	}
	// One Cloud Map name per node: bus.<ns>, or bus-1 … bus-3.<ns>.
	if n := len(s.ByType(awsrules.TypeDiscoveryService)); n != b.nodes {
		t.Errorf("%d Cloud Map services, want one per bus node (%d)", n, b.nodes)
	}
	for _, k := range b.keys() {
		d := awsGet(t, s, awsrules.TypeDiscoveryService, "flock-"+k+"-discovery")
		dns := obj(d, "dnsConfig")
		if d.String("name") != k || dns["namespaceId"] != capture.MockID("flock-namespace") ||
			!reflect.DeepEqual(dns["dnsRecords"], []any{map[string]any{"ttl": float64(10), "type": "A"}}) {
			t.Errorf("%s discovery %v: want an A record %s.<namespace>", k, d.Inputs, k)
		}
	}
}

// hardenedTask checks what every task of the flock shares.
func checkAWSHardenedTask(t *testing.T, td capture.Resource, uid int, limits flock.Limits) awsflock.ContainerDefinition {
	c := awsContainer(t, td)
	name := td.Name
	if !reflect.DeepEqual(list(td, "requiresCompatibilities"), []any{"FARGATE"}) || td.String("networkMode") != "awsvpc" {
		t.Errorf("%s: want a Fargate task in awsvpc mode", name)
	}
	for _, k := range []string{"pidMode", "ipcMode"} {
		if td.String(k) != "" {
			t.Errorf("%s: %s = %q shares a namespace", name, k, td.String(k))
		}
	}
	cpu, _ := strconv.Atoi(td.String("cpu"))
	mem, _ := strconv.Atoi(td.String("memory"))
	size, err := awsflock.SizeFor(limits)
	if err != nil || cpu != size.CPU || mem != size.Memory || c.CPU != int(limits.CPUs*1024) || c.Memory != limits.MemoryMiB {
		t.Errorf("%s: task %s/%s container %d/%d, want container %v vCPU/%d MiB in the smallest Fargate size %+v", name, td.String("cpu"), td.String("memory"), c.CPU, c.Memory, limits.CPUs, limits.MemoryMiB, size)
	}
	if c.User != fmt.Sprintf("%d:%d", uid, uid) || uid < 1000 {
		t.Errorf("%s: user %q, want non-root %d:%d", name, c.User, uid, uid)
	}
	if !c.ReadonlyRootFilesystem {
		t.Errorf("%s: root filesystem is writable", name)
	}
	if !reflect.DeepEqual(c.LinuxParameters.Capabilities.Drop, []string{"ALL"}) || len(c.LinuxParameters.Capabilities.Add) != 0 {
		t.Errorf("%s: capabilities %+v: want drop ALL, add none", name, c.LinuxParameters.Capabilities)
	}
	// An init process: ECS's, or an agent's own (flock-agent init, PID 1,
	// not dumpable, its output bounded), never both.
	if own := len(c.Command) > 0 && c.Command[0] == "init"; c.LinuxParameters.InitProcessEnabled == own {
		t.Errorf("%s: initProcessEnabled %v with command %v: want ECS's init or the agent's own", name, c.LinuxParameters.InitProcessEnabled, c.Command)
	}
	if strings.Contains(name, "agent-") && !reflect.DeepEqual(c.Command, awsflock.AgentCommand(awsflock.DefaultLogRateKiB)) {
		t.Errorf("%s: command %v, want the agent's own init %v", name, c.Command, awsflock.AgentCommand(awsflock.DefaultLogRateKiB))
	}
	var nproc int
	for _, u := range c.Ulimits {
		if u.Name == "nproc" {
			nproc = u.HardLimit
		}
	}
	if nproc != limits.Pids {
		t.Errorf("%s: nproc %d, want the model's process limit %d", name, nproc, limits.Pids)
	}
	if c.LogConfiguration.LogDriver != "awslogs" || c.LogConfiguration.Options["awslogs-region"] != capture.MockRegion || c.LogConfiguration.Options["awslogs-group"] == "" {
		t.Errorf("%s: logs %+v: want awslogs to its group", name, c.LogConfiguration)
	}
	for _, p := range c.PortMappings {
		if p.HostPort != 0 && p.HostPort != p.ContainerPort {
			t.Errorf("%s: port mapping %+v publishes another port", name, p)
		}
	}
	// Every EFS volume: transit encryption and IAM authorization through an
	// access point. Every other volume: an ephemeral task volume, no host path.
	vols := map[string]string{}
	for _, v := range list(td, "volumes") {
		vm := v.(map[string]any)
		n := vm["name"].(string)
		if efs := asMap(vm["efsVolumeConfiguration"]); efs != nil {
			auth := asMap(efs["authorizationConfig"])
			if efs["transitEncryption"] != "ENABLED" || auth["iam"] != "ENABLED" || auth["accessPointId"] == nil || efs["rootDirectory"] != nil {
				t.Errorf("%s: EFS volume %s %v: want transit encryption and IAM through an access point", name, n, efs)
			}
			vols[n] = auth["accessPointId"].(string)
		} else {
			if len(vm) != 1 {
				t.Errorf("%s: volume %v is neither EFS nor ephemeral", name, vm)
			}
			vols[n] = "ephemeral"
		}
	}
	mounts := awsMounts(c, vols)
	if mounts["/tmp"] != "ephemeral rw" || mounts["/run"] != "ephemeral rw" {
		t.Errorf("%s: scratch %v: want ephemeral volumes at /tmp and /run", name, mounts)
	}
	return c
}

// awsMounts maps each of c's mount paths to its volume (as named in vols)
// and its mode, "rw" or "ro".
func awsMounts(c awsflock.ContainerDefinition, vols map[string]string) map[string]string {
	mounts := map[string]string{}
	for _, m := range c.MountPoints {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		mounts[m.ContainerPath] = vols[m.SourceVolume] + " " + mode
	}
	return mounts
}

// 4. One hardened Fargate task per agent: its own user, directories,
// credentials (through secrets), logs; nothing of another agent.
func checkAWSAgentTasks(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	tds := 0
	for _, td := range s.ByType(awsrules.TypeTaskDefinition) {
		if strings.HasPrefix(td.Name, "flock-agent-") {
			tds++
		}
	}
	if tds != len(ids) {
		t.Errorf("%d agent task definitions, want %d", tds, len(ids))
	}
	families := map[string]string{}
	for _, id := range ids {
		td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task")
		c := checkAWSHardenedTask(t, td, awsUID(id), flock.DefaultLimits)
		if other, dup := families[td.String("family")]; dup {
			t.Errorf("%s shares family %s with %s", id, td.String("family"), other)
		}
		families[td.String("family")] = id
		if td.String("executionRoleArn") != awsGet(t, s, awsrules.TypeRole, "flock-"+id+"-exec-role").MockARN() ||
			td.String("taskRoleArn") != awsGet(t, s, awsrules.TypeRole, "flock-"+id+"-task-role").MockARN() {
			t.Errorf("%s: roles %s %s are not its own", id, td.String("executionRoleArn"), td.String("taskRoleArn"))
		}
		vols := map[string]string{}
		for _, v := range list(td, "volumes") {
			vm := v.(map[string]any)
			if efs := asMap(vm["efsVolumeConfiguration"]); efs != nil {
				vols[vm["name"].(string)] = asMap(efs["authorizationConfig"])["accessPointId"].(string)
			} else {
				vols[vm["name"].(string)] = "ephemeral"
			}
		}
		got := awsMounts(c, vols)
		want := map[string]string{
			"/shared/agents/" + id: capture.MockID("flock-"+id+"-dir-ap") + " rw",
			"/shared/common":       capture.MockID("flock-common-ap") + " ro",
			"/shared/logs":         capture.MockID("flock-"+id+"-log-ap") + " rw",
			"/tmp":                 "ephemeral rw",
			"/run":                 "ephemeral rw",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: mounts\n got %v\nwant %v", id, got, want)
		}
		env := map[string]string{}
		for _, e := range c.Environment {
			env[e.Name] = e.Value
		}
		for k, v := range map[string]string{
			"AGENT_ID": id, "NATS_URL": b.url(), "SHARED_DIR": "/shared",
			"HEARTBEAT_INTERVAL": "30s", "TASK_TIMEOUT": "5m0s", "CONCURRENCY": "2",
		} {
			if env[k] != v {
				t.Errorf("%s: env %s = %q, want %q", id, k, env[k], v)
			}
		}
		if _, ok := env[protocol.EnvNkeySeed]; ok {
			t.Errorf("%s: the seed variable is in the plain environment", id)
		}
		// The agent writes its seed beside its status file for its task
		// processes: that must stay on the task's own /run, never on EFS
		// (which outlives the task and the operator's tools read).
		if sf, ok := env[protocol.EnvStatusFile]; ok && !strings.HasPrefix(sf, "/run/") {
			t.Errorf("%s: %s=%s: the agent's status file (and the key beside it) must stay on the task's /run", id, protocol.EnvStatusFile, sf)
		}
		secret := awsGet(t, s, awsrules.TypeSecret, "flock-"+id+"-nkey")
		if !reflect.DeepEqual(c.Secrets, []awsflock.Secret{{Name: protocol.EnvNkeySeed, ValueFrom: secret.MockARN()}}) {
			t.Errorf("%s: secrets %+v: want its own seed as %s", id, c.Secrets, protocol.EnvNkeySeed)
		}
		lg := awsGet(t, s, awsrules.TypeLogGroup, "flock-"+id+"-logs")
		if c.LogConfiguration.Options["awslogs-group"] != lg.String("name") || num(lg, "retentionInDays") != 30 {
			t.Errorf("%s: logs to %q; its group %q keeps %v days (want 30)", id, c.LogConfiguration.Options["awslogs-group"], lg.String("name"), num(lg, "retentionInDays"))
		}
		if len(c.PortMappings) != 0 {
			t.Errorf("%s: declares ports %v", id, c.PortMappings)
		}
		if c.HealthCheck == nil || !reflect.DeepEqual(c.HealthCheck.Command, []string{"CMD", "/flock-agent", "health"}) {
			t.Errorf("%s: health check %+v", id, c.HealthCheck)
		}
	}
}

// 4. One service per agent: one task, no public IP, the agents' group, the
// circuit breaker with rollback, ready only after its network, EFS and policies.
func checkAWSServices(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	check := func(name, td, sg string) capture.Resource {
		svc := awsGet(t, s, awsrules.TypeService, name)
		nc := obj(svc, "networkConfiguration")
		cb := obj(svc, "deploymentCircuitBreaker")
		if num(svc, "desiredCount") != 1 || svc.String("launchType") != "FARGATE" ||
			svc.String("taskDefinition") != awsGet(t, s, awsrules.TypeTaskDefinition, td).MockARN() ||
			num(svc, "deploymentMaximumPercent") != 100 || boolean(svc, "enableExecuteCommand") {
			t.Errorf("%s: %v: want one Fargate task of %s, never two at once, no exec", name, svc.Inputs, td)
		}
		if nc["assignPublicIp"] != false || !reflect.DeepEqual(nc["securityGroups"], []any{capture.MockID(sg)}) ||
			!reflect.DeepEqual(nc["subnets"], []any{capture.MockID("flock-private-1"), capture.MockID("flock-private-2")}) {
			t.Errorf("%s: network %v: want private subnets, %s, no public IP", name, nc, sg)
		}
		if cb["enable"] != true || cb["rollback"] != true {
			t.Errorf("%s: circuit breaker %v", name, cb)
		}
		for _, dep := range []string{"flock-efs-mount-1", "flock-efs-mount-2", "flock-efs-policy", "flock-endpoint-ecr.dkr", "flock-endpoint-s3"} {
			if !dependsOn(svc, capture.Resource{Name: dep}) {
				t.Errorf("%s does not wait for %s", name, dep)
			}
		}
		return svc
	}
	lastBus := "flock-" + b.keys()[len(b.keys())-1]
	for _, id := range ids {
		svc := check("flock-"+id, "flock-"+id+"-task", "flock-agents-sg")
		if obj(svc, "serviceRegistries") != nil {
			t.Errorf("%s registers in Cloud Map", id)
		}
		// The rollout is in order: agents after the bus is steady.
		if !dependsOn(svc, capture.Resource{Name: lastBus}) {
			t.Errorf("%s does not start after %s (the bus's last node) is steady", id, lastBus)
		}
		for _, dep := range []string{"flock-" + id + "-exec-policy", "flock-" + id + "-task-policy"} {
			if !dependsOn(svc, capture.Resource{Name: dep}) {
				t.Errorf("%s does not wait for %s", id, dep)
			}
		}
	}
	// Every bus node: its own service and Cloud Map name; the nodes of a
	// cluster start in order (each after the one before is steady).
	for i, k := range b.keys() {
		bus := check("flock-"+k, "flock-"+k+"-task", "flock-bus-sg")
		if obj(bus, "serviceRegistries")["registryArn"] != awsGet(t, s, awsrules.TypeDiscoveryService, "flock-"+k+"-discovery").MockARN() {
			t.Errorf("%s is not registered as %s.<namespace>: %v", k, k, obj(bus, "serviceRegistries"))
		}
		for _, other := range b.keys() {
			if other != k && dependsOn(bus, capture.Resource{Name: "flock-" + other}) != (i > 0 && other == b.keys()[i-1]) {
				t.Errorf("%s: waits for %s %v; want each node after the one before it only", k, other, dependsOn(bus, capture.Resource{Name: "flock-" + other}))
			}
		}
		// Every node, a single one too: what starts after it (the next
		// node, agents, the gateway) starts once it runs.
		if !boolean(bus, "waitForSteadyState") {
			t.Errorf("%s: no waitForSteadyState: what starts after the bus would start while ECS still places it", k)
		}
	}
	if n := len(s.ByType(awsrules.TypeService)); n != len(ids)+b.nodes+1 {
		t.Errorf("%d services, want one per agent and per bus node, and the flock's services", n)
	}
}

// The bus: each node hardened like the agents, its config from Secrets
// Manager, reassembling into its own rendered config. A single bus keeps
// its store on its own access point; a cluster node on its own task storage
// (no EFS at all) and routes to the other nodes by their Cloud Map names.
// Every node's config parts are its own, and Pulumi secrets.
func checkAWSBus(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	secretsSeen := map[string]string{}
	for i, k := range b.keys() {
		n := i + 1
		td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+k+"-task")
		c := checkAWSHardenedTask(t, td, flock.DefaultUIDBase, flock.DefaultBus.Limits)
		env := map[string]string{}
		for _, e := range c.Environment {
			env[e.Name] = e.Value
			if len(e.Value) > 100 {
				t.Errorf("%s env %s carries data (%d bytes): config must come from Secrets Manager", k, e.Name, len(e.Value))
			}
		}
		values := map[string]string{}
		for name, v := range env {
			values[name] = v
		}
		for _, sec := range c.Secrets {
			var found bool
			for _, r := range s.ByType(awsrules.TypeSecret) {
				if r.MockARN() != sec.ValueFrom {
					continue
				}
				found = true
				if !strings.HasPrefix(r.Name, "flock-"+k+"-") {
					t.Errorf("%s reads %s, not a secret of its own", k, r.Name)
				}
				if other, dup := secretsSeen[r.Name]; dup {
					t.Errorf("%s and %s share the secret %s", k, other, r.Name)
				}
				secretsSeen[r.Name] = k
				v := awsGet(t, s, awsrules.TypeSecretVersion, r.Name)
				values[sec.Name] = v.String("secretString")
				if !v.Inputs["secretString"].IsSecret() {
					t.Errorf("%s: %s is not a Pulumi secret", k, r.Name)
				}
			}
			if !found {
				t.Errorf("%s secret %s from unknown %s", k, sec.Name, sec.ValueFrom)
			}
		}
		conf, ok, err := protocol.DecodeEnv(protocol.EnvBusConfig, func(name string) string { return values[name] })
		if !ok || err != nil {
			t.Fatalf("%s config does not reassemble: %v %v", k, ok, err)
		}
		topo, ok, err := protocol.DecodeEnv(protocol.EnvBusTopology, func(name string) string { return values[name] })
		if !ok || err != nil {
			t.Fatalf("%s topology does not reassemble: %v %v", k, ok, err)
		}
		var cfg struct {
			ServerName string `json:"server_name"`
			JetStream  struct {
				StoreDir string `json:"store_dir"`
			} `json:"jetstream"`
			Authorization struct {
				Users []struct{ Nkey string } `json:"users"`
			} `json:"authorization"`
			Cluster *struct {
				Listen string   `json:"listen"`
				Routes []string `json:"routes"`
			} `json:"cluster"`
		}
		if err := json.Unmarshal(conf, &cfg); err != nil {
			t.Fatalf("%s config: %v", k, err)
		}
		var tp protocol.Topology
		if err := json.Unmarshal(topo, &tp); err != nil || len(tp.Streams) == 0 {
			t.Fatalf("%s topology: %v", k, err)
		}
		for _, st := range tp.Streams {
			if st.Replicas != b.nodes {
				t.Errorf("%s: stream %s has %d replicas, want %d", k, st.Name, st.Replicas, b.nodes)
			}
		}
		// The agents, the operator and the flock's services.
		if len(cfg.Authorization.Users) != len(ids)+2 || awsSeedPattern.Match(conf) {
			t.Errorf("%s config: %d users (want %d), and it must hold no seed", k, len(cfg.Authorization.Users), len(ids)+2)
		}
		var efsVolumes []string
		for _, v := range list(td, "volumes") {
			vm := v.(map[string]any)
			if ap := asMap(asMap(vm["efsVolumeConfiguration"])["authorizationConfig"])["accessPointId"]; ap != nil {
				efsVolumes = append(efsVolumes, vm["name"].(string)+" "+ap.(string))
			}
		}
		ports := map[int]bool{}
		for _, p := range c.PortMappings {
			ports[p.ContainerPort] = true
		}
		if b.nodes == 1 {
			if cfg.JetStream.StoreDir != "/data" || cfg.Cluster != nil || cfg.ServerName != "flock-bus" {
				t.Errorf("single bus config: store %q, cluster %+v, name %q", cfg.JetStream.StoreDir, cfg.Cluster, cfg.ServerName)
			}
			var store string
			for _, m := range c.MountPoints {
				if m.ContainerPath == "/data" && !m.ReadOnly {
					store = m.SourceVolume
				}
			}
			if store == "" || !reflect.DeepEqual(efsVolumes, []string{store + " " + capture.MockID("flock-bus-ap")}) {
				t.Errorf("the bus store at /data (volume %q) is not on its own access point: %v", store, efsVolumes)
			}
			if ports[protocol.RoutePort] || c.HealthCheck.StartPeriod != 10 {
				t.Errorf("single bus: route port %v, health start %d", ports[protocol.RoutePort], c.HealthCheck.StartPeriod)
			}
			continue
		}
		// A cluster node.
		if cfg.ServerName != fmt.Sprintf("flock-bus-%d", n) || cfg.JetStream.StoreDir != "/run/flock-bus/store" {
			t.Errorf("%s: server %q store %q", k, cfg.ServerName, cfg.JetStream.StoreDir)
		}
		var routes []string
		for _, o := range b.keys() {
			if o != k {
				routes = append(routes, "nats-route://"+o+".flock.flock.internal:6222")
			}
		}
		if cfg.Cluster == nil || cfg.Cluster.Listen != "0.0.0.0:6222" || !reflect.DeepEqual(cfg.Cluster.Routes, routes) {
			t.Errorf("%s: cluster %+v, want routes %v", k, cfg.Cluster, routes)
		}
		if len(efsVolumes) != 0 {
			t.Errorf("%s mounts EFS %v: a cluster node's store is its own task storage", k, efsVolumes)
		}
		// The store is under a writable task volume, not the read-only root.
		var storeVolume bool
		for _, m := range c.MountPoints {
			if strings.HasPrefix(cfg.JetStream.StoreDir+"/", m.ContainerPath+"/") && !m.ReadOnly {
				storeVolume = true
			}
		}
		if !storeVolume {
			t.Errorf("%s: the store %s is on no writable volume", k, cfg.JetStream.StoreDir)
		}
		if obj(td, "ephemeralStorage") != nil {
			t.Errorf("%s asks for task storage %v: the default store fits in the free 20 GiB", k, obj(td, "ephemeralStorage"))
		}
		if !ports[protocol.RoutePort] || c.HealthCheck == nil || c.HealthCheck.StartPeriod != awsflock.ClusterStartPeriod || c.HealthCheck.StartPeriod < 300 {
			t.Errorf("%s: route port %v, health check %+v: want 6222 and a start period of 300 s", k, ports[protocol.RoutePort], c.HealthCheck)
		}
	}
}

// The operator task: hardened, its own UID (the owner of common), the
// operator's credentials through secrets, common read-write through its own
// access point, no service (it runs on demand), the operator group.
func checkAWSOperator(t *testing.T, s *capture.Stack, b awsBus) {
	td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-operator-task")
	op := flock.DefaultUIDBase - 1
	c := checkAWSHardenedTask(t, td, op, flock.DefaultLimits)
	sec := awsGet(t, s, awsrules.TypeSecret, "flock-operator-nkey")
	if !reflect.DeepEqual(c.Secrets, []awsflock.Secret{{Name: protocol.EnvCLINkeySeed, ValueFrom: sec.MockARN()}}) {
		t.Errorf("operator secrets %+v", c.Secrets)
	}
	if env := c.Environment; !reflect.DeepEqual(env, []awsflock.KeyValue{{Name: "FLOCK_NATS_URL", Value: b.url()}, {Name: "SHARED_DIR", Value: "/shared"}}) {
		t.Errorf("operator env %+v", env)
	}
	if _, ok := s.Get(awsrules.TypeService, "flock-operator"); ok {
		t.Error("the operator task runs as a service: it is run on demand")
	}
	key, _ := credentials.Derive([]byte(capture.TestSecret), "operator")
	if v := awsGet(t, s, awsrules.TypeSecretVersion, "flock-operator-nkey"); v.String("secretString") != key.Seed || !v.Inputs["secretString"].IsSecret() {
		t.Error("the operator secret does not hold the operator's seed as a Pulumi secret")
	}
	if s.Outputs["operatorTaskDefinition"].Value != td.String("family") || s.Outputs["operatorSecurityGroup"].Value != capture.MockID("flock-operator-sg") {
		t.Errorf("outputs name the operator task %v and group %v", s.Outputs["operatorTaskDefinition"], s.Outputs["operatorSecurityGroup"])
	}
}

// Every service is followed by its rollout check (infra/awsverify, run on
// the deploying machine after each change of it): waiting for a steady
// state passes a rollback, the check fails it.
func TestAWSEveryServiceHasARolloutCheck(t *testing.T) {
	s := awsGatewayStack(t, capture.Config{"flock:gateway": `{"upstreams": {"anthropic": {}}}`})
	checks := map[string]capture.Resource{}
	for _, c := range s.ByType(capture.TypeCommand) {
		checks[c.Name] = c
	}
	services := s.ByType(awsrules.TypeService)
	if len(services) < 6 {
		t.Fatalf("%d services", len(services))
	}
	for _, svc := range services {
		c, ok := checks[svc.Name+"-rollout"]
		if !ok {
			t.Errorf("service %s has no rollout check", svc.Name)
			continue
		}
		create := c.String("create")
		for _, want := range []string{awsflock.VerifyCommand + " ", "--service " + svc.String("name") + " ", "--task-definition " + svc.String("taskDefinition"), "--region " + capture.MockRegion} {
			if !strings.Contains(create, want) {
				t.Errorf("%s: create %q lacks %q", c.Name, create, want)
			}
		}
		if !slices.ContainsFunc(c.Deps, func(u string) bool { return strings.HasSuffix(u, "::"+svc.Name) }) {
			t.Errorf("%s does not wait for its service (deps %v)", c.Name, c.Deps)
		}
	}
}
