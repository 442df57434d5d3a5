package stacks_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack under the mock engine: every invariant for 3 and 50
// agents. Resources are found by name (<flock>-<agent>-<part>) and checked
// against each other through the mock IDs and ARNs, so a policy or a task
// that names another agent's resource fails.

func awsStack(t testing.TB, overrides capture.Config) *capture.Stack {
	t.Helper()
	s, err := capture.RunAWS(overrides)
	if err != nil {
		t.Fatalf("aws stack: %v", err)
	}
	return s
}

func awsGet(t testing.TB, s *capture.Stack, typ, name string) capture.Resource {
	t.Helper()
	r, ok := s.Get(typ, name)
	if !ok {
		t.Fatalf("no %s %s", typ, name)
	}
	return r
}

func awsAgentIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "agent-" + strconv.Itoa(i+1)
	}
	return ids
}

func awsUID(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "agent-"))
	return flock.DefaultUIDBase + n
}

func awsContainer(t testing.TB, td capture.Resource) awsflock.ContainerDefinition {
	t.Helper()
	defs, err := awsflock.ParseContainerDefinitions(td.String("containerDefinitions"))
	if err != nil || len(defs) != 1 {
		t.Fatalf("%s: container definitions %q: %v (want exactly one container)", td.Name, td.String("containerDefinitions"), err)
	}
	// Fields the flock never sets must not be there either (privileged, host paths, ...).
	var raw []map[string]any
	_ = json.Unmarshal([]byte(td.String("containerDefinitions")), &raw)
	for _, k := range []string{"privileged", "dockerSecurityOptions", "links", "extraHosts", "dnsServers", "interactive", "pseudoTerminal"} {
		if _, ok := raw[0][k]; ok {
			t.Errorf("%s: container sets %s", td.Name, k)
		}
	}
	return defs[0]
}

func awsPolicy(t testing.TB, r capture.Resource, key string) awsflock.PolicyDocument {
	t.Helper()
	var p awsflock.PolicyDocument
	if err := json.Unmarshal([]byte(r.String(key)), &p); err != nil {
		t.Fatalf("%s: %s is not a policy: %v", r.Name, key, err)
	}
	return p
}

func TestAWSStackInvariants(t *testing.T) {
	for _, n := range []int{3, 50} {
		t.Run(fmt.Sprintf("%d agents", n), func(t *testing.T) {
			s := awsStack(t, capture.Config{"flock:agentCount": strconv.Itoa(n)})
			ids := awsAgentIDs(n)
			checkAWSComponent(t, s)
			checkAWSNetwork(t, s)
			checkAWSSecurityGroups(t, s)
			checkAWSStorage(t, s, ids)
			checkAWSCluster(t, s)
			checkAWSAgentTasks(t, s, ids)
			checkAWSServices(t, s, ids)
			checkAWSIAM(t, s, ids)
			checkAWSImages(t, s)
			checkAWSSecrets(t, s, ids)
			checkAWSBus(t, s, ids)
			checkAWSOperator(t, s)
			checkAWSAccessPointUse(t, s, ids)
			checkAWSTags(t, s, ids)
		})
	}
}

// Every resource is a child of the flock:aws:Flock component.
func checkAWSComponent(t *testing.T, s *capture.Stack) {
	comps := s.ByType(capture.TypeAWSFlock)
	if len(comps) != 1 || comps[0].Name != "flock" {
		t.Fatalf("want one flock:aws:Flock named flock, got %v", comps)
	}
	for _, r := range s.Resources {
		if r.Type == capture.TypeAWSFlock || r.Type == capture.TypeStack {
			continue
		}
		if !strings.HasSuffix(r.Parent, "flock:aws:Flock::flock") {
			t.Errorf("%s %s: parent %q, want the flock component", r.Type, r.Name, r.Parent)
		}
		if !strings.HasPrefix(r.Name, "flock-") {
			t.Errorf("%s %s: not named from the component", r.Type, r.Name)
		}
	}
}

// 1. A VPC with private subnets in two zones, no public IPs, no route out;
// VPC endpoints for ECR, logs and Secrets Manager, and S3 for layers only.
func checkAWSNetwork(t *testing.T, s *capture.Stack) {
	vpc := awsGet(t, s, capture.TypeVpc, "flock-vpc")
	if vpc.String("cidrBlock") != "10.220.0.0/16" || !boolean(vpc, "enableDnsSupport") || !boolean(vpc, "enableDnsHostnames") {
		t.Errorf("vpc %v: want 10.220.0.0/16 with DNS support and hostnames", vpc.Inputs)
	}
	subnets := s.ByType(capture.TypeSubnet)
	zones := map[string]bool{}
	for _, sub := range subnets {
		if boolean(sub, "mapPublicIpOnLaunch") {
			t.Errorf("%s maps public IPs", sub.Name)
		}
		if p := netip.MustParsePrefix(sub.String("cidrBlock")); !netip.MustParsePrefix("10.220.0.0/16").Contains(p.Addr()) {
			t.Errorf("%s: %s outside the VPC", sub.Name, p)
		}
		zones[sub.String("availabilityZone")] = true
	}
	if len(subnets) != 2 || len(zones) != 2 {
		t.Errorf("%d subnets in zones %v: want private subnets in 2 zones", len(subnets), zones)
	}
	for _, typ := range []string{capture.TypeInternetGateway, capture.TypeNatGateway, capture.TypeEip, capture.TypeRoute} {
		if r := s.ByType(typ); len(r) != 0 {
			t.Errorf("endpoints egress declares %s %s: no route to the internet may exist", typ, r[0].Name)
		}
	}
	for _, rt := range s.ByType(capture.TypeRouteTable) {
		if len(list(rt, "routes")) != 0 {
			t.Errorf("%s has routes %v", rt.Name, list(rt, "routes"))
		}
	}
	dsg := awsGet(t, s, capture.TypeDefaultSG, "flock-default-sg")
	if len(list(dsg, "ingress"))+len(list(dsg, "egress")) != 0 {
		t.Errorf("the VPC's default security group keeps rules")
	}
	want := map[string]bool{}
	for _, svc := range []string{"ecr.api", "ecr.dkr", "logs", "secretsmanager"} {
		want["com.amazonaws."+capture.MockRegion+"."+svc] = true
	}
	for _, ep := range s.ByType(capture.TypeVpcEndpoint) {
		svc := ep.String("serviceName")
		switch ep.String("vpcEndpointType") {
		case "Interface":
			if !want[svc] {
				t.Errorf("unexpected interface endpoint %s", svc)
			}
			delete(want, svc)
			if !boolean(ep, "privateDnsEnabled") || len(list(ep, "subnetIds")) != 2 ||
				!reflect.DeepEqual(list(ep, "securityGroupIds"), []any{capture.MockID("flock-endpoints-sg")}) {
				t.Errorf("%s: want private DNS in both private subnets behind the endpoints group: %v", ep.Name, ep.Inputs)
			}
		case "Gateway":
			if svc != "com.amazonaws."+capture.MockRegion+".s3" || !reflect.DeepEqual(list(ep, "routeTableIds"), []any{capture.MockID("flock-private-rt")}) {
				t.Errorf("%s: want the S3 gateway on the private route table: %v", ep.Name, ep.Inputs)
			}
			p := awsPolicy(t, ep, "policy")
			if len(p.Statement) != 1 || p.Statement[0].Effect != "Allow" ||
				!reflect.DeepEqual(p.Statement[0].Resource, []string{"arn:aws:s3:::prod-" + capture.MockRegion + "-starport-layer-bucket/*"}) {
				t.Errorf("S3 endpoint policy %+v: want ECR's layer bucket only", p)
			}
		default:
			t.Errorf("%s: endpoint type %q", ep.Name, ep.String("vpcEndpointType"))
		}
	}
	if len(want) != 0 {
		t.Errorf("missing interface endpoints %v", want)
	}
}

type awsSGRule struct {
	sg, kind string
	port     int
	peer     string // a group's role, a CIDR list or a prefix list
}

func awsSGRules(t *testing.T, s *capture.Stack) []awsSGRule {
	role := map[string]string{}
	for _, g := range s.ByType(capture.TypeSecurityGroup) {
		role[capture.MockID(g.Name)] = strings.TrimSuffix(strings.TrimPrefix(g.Name, "flock-"), "-sg")
		if len(list(g, "ingress"))+len(list(g, "egress")) != 0 {
			t.Errorf("%s has inline rules", g.Name)
		}
	}
	var out []awsSGRule
	for _, r := range s.ByType(capture.TypeSGRule) {
		if r.String("protocol") != "tcp" || num(r, "fromPort") != num(r, "toPort") {
			t.Errorf("%s: protocol %q ports %v-%v: want one TCP port", r.Name, r.String("protocol"), num(r, "fromPort"), num(r, "toPort"))
		}
		peer := role[r.String("sourceSecurityGroupId")]
		if c := list(r, "cidrBlocks"); len(c) > 0 {
			peer = fmt.Sprint(c)
		}
		if p := list(r, "prefixListIds"); len(p) > 0 {
			peer = fmt.Sprint(p)
		}
		if peer == "" {
			t.Errorf("%s: no peer", r.Name)
		}
		out = append(out, awsSGRule{role[r.String("securityGroupId")], r.String("type"), int(num(r, "fromPort")), peer})
	}
	return out
}

// 2. Agents: no ingress, egress to the bus, EFS and the endpoints only. The
// bus: 4222 from agents and the operator. EFS: 2049 from the flock's tasks.
func checkAWSSecurityGroups(t *testing.T, s *capture.Stack) {
	rules := awsSGRules(t, s)
	got := map[string][]string{}
	for _, r := range rules {
		k := r.sg + " " + r.kind
		got[k] = append(got[k], fmt.Sprintf("%d %s", r.port, r.peer))
	}
	for k := range got {
		sort.Strings(got[k])
	}
	s3 := "[" + capture.MockPrefixS3 + "]"
	want := map[string][]string{
		"agents egress":     {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints"},
		"operator egress":   {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints", "8222 bus"},
		"bus ingress":       {"4222 agents", "4222 operator", "8222 operator"},
		"bus egress":        {"2049 efs", "443 " + s3, "443 endpoints"},
		"efs ingress":       {"2049 agents", "2049 bus", "2049 operator"},
		"endpoints ingress": {"443 agents", "443 bus", "443 operator"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("security group rules\n got %v\nwant %v", got, want)
	}
}

// 3. EFS: encrypted; a mount target per subnet behind the EFS group; a policy
// denying non-TLS access and mounts without an access point; access points
// per agent directory and log (its UID, 0700), common, the bus store.
func checkAWSStorage(t *testing.T, s *capture.Stack, ids []string) {
	fs := awsGet(t, s, capture.TypeFileSystem, "flock-efs")
	if !boolean(fs, "encrypted") {
		t.Error("the file system is not encrypted at rest")
	}
	mts := s.ByType(capture.TypeMountTarget)
	if len(mts) != 2 {
		t.Errorf("%d mount targets, want one per private subnet", len(mts))
	}
	for _, mt := range mts {
		if !reflect.DeepEqual(list(mt, "securityGroups"), []any{capture.MockID("flock-efs-sg")}) {
			t.Errorf("%s: security groups %v", mt.Name, list(mt, "securityGroups"))
		}
	}
	fsARN := fs.MockARN()
	p := awsPolicy(t, awsGet(t, s, capture.TypeFileSystemPolicy, "flock-efs-policy"), "policy")
	var tls, noAP bool
	for _, st := range p.Statement {
		if st.Effect != "Deny" {
			t.Errorf("file system policy allows %v: it must only deny (task roles grant)", st.Action)
		}
		if !reflect.DeepEqual(st.Resource, []string{fsARN}) {
			t.Errorf("file system policy statement %s on %v, want %s", st.Sid, st.Resource, fsARN)
		}
		if reflect.DeepEqual(st.Condition, map[string]map[string]any{"Bool": {"aws:SecureTransport": "false"}}) && reflect.DeepEqual(st.Action, []string{"*"}) {
			tls = true
		}
		if reflect.DeepEqual(st.Condition, map[string]map[string]any{"Null": {awsflock.APCondition: "true"}}) && contains(awsAnyList(st.Action), "elasticfilesystem:ClientMount") {
			noAP = true
		}
	}
	if !tls || !noAP {
		t.Errorf("file system policy %+v: want a deny without TLS (%v) and a deny of mounts without an access point (%v)", p, tls, noAP)
	}

	type awsAPWant struct {
		path       string
		owner, uid int
		perms      string
	}
	op := awsflock.OperatorUID(flock.Model{Bus: flock.Bus{UID: flock.DefaultUIDBase}})
	want := map[string]awsAPWant{
		"flock-common-ap":        {"/common", op, awsflock.NobodyUID, "0755"},
		"flock-common-writer-ap": {"/common", op, op, "0755"},
		"flock-bus-ap":           {"/bus", flock.DefaultUIDBase, flock.DefaultUIDBase, "0700"},
	}
	for _, id := range ids {
		want["flock-"+id+"-dir-ap"] = awsAPWant{"/agents/" + id, awsUID(id), awsUID(id), "0700"}
		want["flock-"+id+"-log-ap"] = awsAPWant{"/logs/" + id, awsUID(id), awsUID(id), "0700"}
	}
	aps := s.ByType(capture.TypeAccessPoint)
	if len(aps) != len(want) {
		t.Errorf("%d access points, want %d", len(aps), len(want))
	}
	paths := map[string]string{}
	for _, ap := range aps {
		w, ok := want[ap.Name]
		if !ok {
			t.Errorf("unexpected access point %s", ap.Name)
			continue
		}
		root := obj(ap, "rootDirectory")
		ci := asMap(root["creationInfo"])
		if root["path"] != w.path || ci["ownerUid"] != float64(w.owner) || ci["ownerGid"] != float64(w.owner) || ci["permissions"] != w.perms {
			t.Errorf("%s: root %v, want %s owned by %d mode %s", ap.Name, root, w.path, w.owner, w.perms)
		}
		if pu := obj(ap, "posixUser"); pu["uid"] != float64(w.uid) || pu["gid"] != float64(w.uid) {
			t.Errorf("%s: posix user %v, want %d:%d", ap.Name, pu, w.uid, w.uid)
		}
		if ap.String("fileSystemId") != capture.MockID("flock-efs") {
			t.Errorf("%s: on %s", ap.Name, ap.String("fileSystemId"))
		}
		if other, dup := paths[w.path]; dup && w.path != "/common" {
			t.Errorf("%s and %s share %s", ap.Name, other, w.path)
		}
		paths[w.path] = ap.Name
	}
}

func checkAWSCluster(t *testing.T, s *capture.Stack) {
	c := awsGet(t, s, capture.TypeCluster, "flock-cluster")
	if !reflect.DeepEqual(list(c, "settings"), []any{map[string]any{"name": "containerInsights", "value": "enabled"}}) {
		t.Errorf("cluster settings %v: want Container Insights", list(c, "settings"))
	}
	ns := awsGet(t, s, capture.TypeNamespace, "flock-namespace")
	if ns.String("name") != "flock.flock.internal" || ns.String("vpc") != capture.MockID("flock-vpc") {
		t.Errorf("namespace %v: want flock.flock.internal in the flock's VPC", ns.Inputs)
	}
	d := awsGet(t, s, capture.TypeDiscovery, "flock-bus-discovery")
	dns := obj(d, "dnsConfig")
	if d.String("name") != "bus" || dns["namespaceId"] != capture.MockID("flock-namespace") ||
		!reflect.DeepEqual(dns["dnsRecords"], []any{map[string]any{"ttl": float64(10), "type": "A"}}) {
		t.Errorf("bus discovery %v: want an A record bus.<namespace>", d.Inputs)
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
	if !c.LinuxParameters.InitProcessEnabled {
		t.Errorf("%s: no init process", name)
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
	mounts := map[string]string{}
	for _, m := range c.MountPoints {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		mounts[m.ContainerPath] = vols[m.SourceVolume] + " " + mode
	}
	if mounts["/tmp"] != "ephemeral rw" || mounts["/run"] != "ephemeral rw" {
		t.Errorf("%s: scratch %v: want ephemeral volumes at /tmp and /run", name, mounts)
	}
	return c
}

// 4. One hardened Fargate task per agent: its own user, directories,
// credentials (through secrets), logs; nothing of another agent.
func checkAWSAgentTasks(t *testing.T, s *capture.Stack, ids []string) {
	tds := 0
	for _, td := range s.ByType(capture.TypeTaskDefinition) {
		if strings.HasPrefix(td.Name, "flock-agent-") {
			tds++
		}
	}
	if tds != len(ids) {
		t.Errorf("%d agent task definitions, want %d", tds, len(ids))
	}
	families := map[string]string{}
	for _, id := range ids {
		td := awsGet(t, s, capture.TypeTaskDefinition, "flock-"+id+"-task")
		c := checkAWSHardenedTask(t, td, awsUID(id), flock.DefaultLimits)
		if other, dup := families[td.String("family")]; dup {
			t.Errorf("%s shares family %s with %s", id, td.String("family"), other)
		}
		families[td.String("family")] = id
		if td.String("executionRoleArn") != awsGet(t, s, capture.TypeRole, "flock-"+id+"-exec-role").MockARN() ||
			td.String("taskRoleArn") != awsGet(t, s, capture.TypeRole, "flock-"+id+"-task-role").MockARN() {
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
		got := map[string]string{}
		for _, m := range c.MountPoints {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			got[m.ContainerPath] = vols[m.SourceVolume] + " " + mode
		}
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
			"AGENT_ID": id, "NATS_URL": "nats://bus.flock.flock.internal:4222", "SHARED_DIR": "/shared",
			"HEARTBEAT_INTERVAL": "30s", "TASK_TIMEOUT": "5m0s", "CONCURRENCY": "2",
		} {
			if env[k] != v {
				t.Errorf("%s: env %s = %q, want %q", id, k, env[k], v)
			}
		}
		if _, ok := env[protocol.EnvNkeySeed]; ok {
			t.Errorf("%s: the seed variable is in the plain environment", id)
		}
		secret := awsGet(t, s, capture.TypeSecret, "flock-"+id+"-nkey")
		if !reflect.DeepEqual(c.Secrets, []awsflock.Secret{{Name: protocol.EnvNkeySeed, ValueFrom: secret.MockARN()}}) {
			t.Errorf("%s: secrets %+v: want its own seed as %s", id, c.Secrets, protocol.EnvNkeySeed)
		}
		lg := awsGet(t, s, capture.TypeLogGroup, "flock-"+id+"-logs")
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
func checkAWSServices(t *testing.T, s *capture.Stack, ids []string) {
	check := func(name, td, sg string) capture.Resource {
		svc := awsGet(t, s, capture.TypeService, name)
		nc := obj(svc, "networkConfiguration")
		cb := obj(svc, "deploymentCircuitBreaker")
		if num(svc, "desiredCount") != 1 || svc.String("launchType") != "FARGATE" ||
			svc.String("taskDefinition") != awsGet(t, s, capture.TypeTaskDefinition, td).MockARN() ||
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
	for _, id := range ids {
		svc := check("flock-"+id, "flock-"+id+"-task", "flock-agents-sg")
		if obj(svc, "serviceRegistries") != nil {
			t.Errorf("%s registers in Cloud Map", id)
		}
		for _, dep := range []string{"flock-" + id + "-exec-policy", "flock-" + id + "-task-policy"} {
			if !dependsOn(svc, capture.Resource{Name: dep}) {
				t.Errorf("%s does not wait for %s", id, dep)
			}
		}
	}
	bus := check("flock-bus", "flock-bus-task", "flock-bus-sg")
	if obj(bus, "serviceRegistries")["registryArn"] != awsGet(t, s, capture.TypeDiscovery, "flock-bus-discovery").MockARN() {
		t.Errorf("the bus is not registered as bus.<namespace>: %v", obj(bus, "serviceRegistries"))
	}
	if n := len(s.ByType(capture.TypeService)); n != len(ids)+1 {
		t.Errorf("%d services, want one per agent and the bus", n)
	}
}

// 5. Execution roles: pull, their own log group, their own secrets. Task
// roles: mount their own access points (a condition on the access point ARN)
// and common read-only.
func checkAWSIAM(t *testing.T, s *capture.Stack, ids []string) {
	repo := awsGet(t, s, capture.TypeRepository, "flock-images").MockARN()
	fsARN := awsGet(t, s, capture.TypeFileSystem, "flock-efs").MockARN()
	common := awsGet(t, s, capture.TypeAccessPoint, "flock-common-ap").MockARN()
	for _, r := range s.ByType(capture.TypeRole) {
		if len(list(r, "managedPolicyArns")) > 0 || len(list(r, "inlinePolicies")) > 0 {
			t.Errorf("%s: attaches policies besides its one role policy", r.Name)
		}
		trust := awsPolicy(t, r, "assumeRolePolicy")
		if len(trust.Statement) != 1 || !reflect.DeepEqual(trust.Statement[0].Principal, map[string]any{"Service": "ecs-tasks.amazonaws.com"}) {
			t.Errorf("%s: trust %+v: want ECS tasks only", r.Name, trust)
		}
		if strings.HasSuffix(r.Name, "-task-role") && trust.Statement[0].Condition["StringEquals"]["aws:SourceAccount"] != capture.MockAccount {
			t.Errorf("%s: trust lacks the source-account condition", r.Name)
		}
	}
	type want struct {
		secrets []string
		rw, ro  []string
	}
	wants := map[string]want{
		"bus":      {nil, []string{awsGet(t, s, capture.TypeAccessPoint, "flock-bus-ap").MockARN()}, nil},
		"operator": {[]string{awsGet(t, s, capture.TypeSecret, "flock-operator-nkey").MockARN()}, []string{awsGet(t, s, capture.TypeAccessPoint, "flock-common-writer-ap").MockARN()}, nil},
	}
	for _, sec := range s.ByType(capture.TypeSecret) {
		if strings.HasPrefix(sec.Name, "flock-bus-") {
			w := wants["bus"]
			w.secrets = append(w.secrets, sec.MockARN())
			wants["bus"] = w
		}
	}
	for _, id := range ids {
		wants[id] = want{
			[]string{awsGet(t, s, capture.TypeSecret, "flock-"+id+"-nkey").MockARN()},
			[]string{awsGet(t, s, capture.TypeAccessPoint, "flock-"+id+"-dir-ap").MockARN(), awsGet(t, s, capture.TypeAccessPoint, "flock-"+id+"-log-ap").MockARN()},
			[]string{common},
		}
	}
	if n := len(s.ByType(capture.TypeRolePolicy)); n != 2*len(wants) {
		t.Errorf("%d role policies, want an execution and a task policy for each of %d tasks", n, len(wants))
	}
	for key, w := range wants {
		ep := awsGet(t, s, capture.TypeRolePolicy, "flock-"+key+"-exec-policy")
		if ep.String("role") != capture.MockID("flock-"+key+"-exec-role") {
			t.Errorf("%s: execution policy on %s", key, ep.String("role"))
		}
		lg := awsGet(t, s, capture.TypeLogGroup, "flock-"+key+"-logs").MockARN()
		granted := map[string][]string{}
		for _, st := range awsPolicy(t, ep, "policy").Statement {
			if st.Effect != "Allow" || st.Condition != nil {
				t.Errorf("%s: execution statement %+v", key, st)
			}
			for _, a := range st.Action {
				granted[a] = append(granted[a], st.Resource...)
			}
		}
		sort.Strings(w.secrets)
		wantGrants := map[string][]string{
			"ecr:GetAuthorizationToken":       {"*"},
			"ecr:BatchCheckLayerAvailability": {repo}, "ecr:BatchGetImage": {repo}, "ecr:GetDownloadUrlForLayer": {repo},
			"logs:CreateLogStream": {lg + ":log-stream:*"}, "logs:PutLogEvents": {lg + ":log-stream:*"},
			"secretsmanager:GetSecretValue": w.secrets,
		}
		if !reflect.DeepEqual(granted, wantGrants) {
			t.Errorf("%s: execution role grants\n got %v\nwant %v", key, granted, wantGrants)
		}

		tp := awsGet(t, s, capture.TypeRolePolicy, "flock-"+key+"-task-policy")
		if tp.String("role") != capture.MockID("flock-"+key+"-task-role") {
			t.Errorf("%s: task policy on %s", key, tp.String("role"))
		}
		var rw, ro []string
		for _, st := range awsPolicy(t, tp, "policy").Statement {
			aps := awsStrings(st.Condition["StringEquals"][awsflock.APCondition])
			if st.Effect != "Allow" || !reflect.DeepEqual(st.Resource, []string{fsARN}) || len(aps) == 0 || len(st.Condition) != 1 {
				t.Errorf("%s: task statement %+v: every grant must be on the file system and conditioned on access points", key, st)
				continue
			}
			switch {
			case reflect.DeepEqual(st.Action, []string{"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}):
				rw = append(rw, aps...)
			case reflect.DeepEqual(st.Action, []string{"elasticfilesystem:ClientMount"}):
				ro = append(ro, aps...)
			default:
				t.Errorf("%s: task role may %v", key, st.Action)
			}
		}
		if !reflect.DeepEqual(rw, w.rw) || !reflect.DeepEqual(ro, w.ro) {
			t.Errorf("%s: task role mounts rw %v ro %v, want rw %v ro %v", key, rw, ro, w.rw, w.ro)
		}
	}
}

// 6. ECR: scan on push, immutable tags; both images built and pushed with
// ECR's token (a secret), tasks pinned to the pushed digest.
func checkAWSImages(t *testing.T, s *capture.Stack) {
	repo := awsGet(t, s, capture.TypeRepository, "flock-images")
	if repo.String("imageTagMutability") != "IMMUTABLE" || obj(repo, "imageScanningConfiguration")["scanOnPush"] != true {
		t.Errorf("repository %v: want immutable tags and scan on push", repo.Inputs)
	}
	url := capture.MockRegistry() + "/flock-images"
	for _, target := range []string{"agent", "bus"} {
		img := awsGet(t, s, capture.TypeImage, "flock-"+target+"-image")
		reg := img.Inputs["registry"].ObjectValue()
		if !strings.HasPrefix(img.String("imageName"), url+":"+target+"-c") || boolean(img, "skipPush") {
			t.Errorf("%s image %q: want a pushed content tag in %s", target, img.String("imageName"), url)
		}
		if reg["server"].StringValue() != url || reg["username"].StringValue() != "AWS" || !reg["password"].IsSecret() {
			t.Errorf("%s image registry %v: want ECR's token, the password a secret", target, reg)
		}
		if b := obj(img, "build"); b["target"] != target || b["platform"] != "linux/amd64" {
			t.Errorf("%s image build %v", target, b)
		}
	}
	for _, td := range s.ByType(capture.TypeTaskDefinition) {
		c := awsContainer(t, td)
		target := "agent"
		if td.Name == "flock-bus-task" {
			target = "bus"
		}
		if c.Image != url+"@"+capture.MockDigest("flock-"+target+"-image") {
			t.Errorf("%s runs %q, want the pushed %s digest", td.Name, c.Image, target)
		}
	}
}

var awsSeedPattern = regexp.MustCompile(`S[UO][A-Z2-7]{50,}`)

// plainSeeds finds nkey seeds outside Pulumi secrets.
func awsPlainSeeds(v resource.PropertyValue, path string, out *[]string) {
	switch {
	case v.IsSecret():
	case v.IsOutput():
		if o := v.OutputValue(); !o.Secret {
			awsPlainSeeds(o.Element, path, out)
		}
	case v.IsString():
		if awsSeedPattern.MatchString(v.StringValue()) {
			*out = append(*out, path)
		}
	case v.IsArray():
		for i, e := range v.ArrayValue() {
			awsPlainSeeds(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case v.IsObject():
		for k, e := range v.ObjectValue() {
			awsPlainSeeds(e, path+"."+string(k), out)
		}
	}
}

// Credentials: each agent's seed is in its own secret, as a Pulumi secret;
// no seed appears in plain text in any input or output.
func checkAWSSecrets(t *testing.T, s *capture.Stack, ids []string) {
	for _, id := range ids {
		v := awsGet(t, s, capture.TypeSecretVersion, "flock-"+id+"-nkey")
		key, _ := credentials.Derive([]byte(capture.TestSecret), protocol.AgentUser(id))
		if !v.Inputs["secretString"].IsSecret() || v.String("secretString") != key.Seed {
			t.Errorf("%s: secret value is not its seed held as a Pulumi secret", id)
		}
		if v.String("secretId") != capture.MockID("flock-"+id+"-nkey") {
			t.Errorf("%s: seed stored in %s", id, v.String("secretId"))
		}
	}
	var leaks []string
	for _, r := range s.Resources {
		if r.Type == capture.TypeStack {
			continue
		}
		awsPlainSeeds(resource.NewObjectProperty(r.Inputs), r.Type+" "+r.Name, &leaks)
	}
	for name, o := range s.Outputs {
		if !o.Secret && awsSeedPattern.MatchString(fmt.Sprint(o.Value)) {
			leaks = append(leaks, "output "+name)
		}
	}
	if len(leaks) != 0 {
		t.Errorf("nkey seeds in plain text: %v", leaks)
	}
	if !s.Outputs["operatorSeed"].Secret {
		t.Error("operatorSeed is not a secret output")
	}
}

// The bus: hardened like the agents, its store on its own access point, its
// config from Secrets Manager, reassembling into the rendered config.
func checkAWSBus(t *testing.T, s *capture.Stack, ids []string) {
	td := awsGet(t, s, capture.TypeTaskDefinition, "flock-bus-task")
	c := checkAWSHardenedTask(t, td, flock.DefaultUIDBase, flock.DefaultBus.Limits)
	env := map[string]string{}
	for _, e := range c.Environment {
		env[e.Name] = e.Value
		if len(e.Value) > 100 {
			t.Errorf("bus env %s carries data (%d bytes): config must come from Secrets Manager", e.Name, len(e.Value))
		}
	}
	values := map[string]string{}
	for k, v := range env {
		values[k] = v
	}
	for _, sec := range c.Secrets {
		var found bool
		for _, r := range s.ByType(capture.TypeSecret) {
			if r.MockARN() == sec.ValueFrom {
				values[sec.Name] = awsGet(t, s, capture.TypeSecretVersion, r.Name).String("secretString")
				found = true
			}
		}
		if !found {
			t.Errorf("bus secret %s from unknown %s", sec.Name, sec.ValueFrom)
		}
	}
	conf, ok, err := protocol.DecodeEnv(protocol.EnvBusConfig, func(k string) string { return values[k] })
	if !ok || err != nil {
		t.Fatalf("bus config does not reassemble: %v %v", ok, err)
	}
	if _, ok, err := protocol.DecodeEnv(protocol.EnvBusTopology, func(k string) string { return values[k] }); !ok || err != nil {
		t.Fatalf("bus topology does not reassemble: %v %v", ok, err)
	}
	var cfg struct {
		HTTP      string `json:"http"`
		JetStream struct {
			StoreDir string `json:"store_dir"`
		} `json:"jetstream"`
		Authorization struct {
			Users []struct{ Nkey string } `json:"users"`
		} `json:"authorization"`
	}
	if err := json.Unmarshal(conf, &cfg); err != nil {
		t.Fatalf("bus config: %v", err)
	}
	if len(cfg.Authorization.Users) != len(ids)+1 || cfg.JetStream.StoreDir != "/data" || awsSeedPattern.Match(conf) {
		t.Errorf("bus config: %d users (want %d), store %q, and it must hold no seed", len(cfg.Authorization.Users), len(ids)+1, cfg.JetStream.StoreDir)
	}
	var store string
	for _, m := range c.MountPoints {
		if m.ContainerPath == "/data" && !m.ReadOnly {
			store = m.SourceVolume
		}
	}
	for _, v := range list(td, "volumes") {
		vm := v.(map[string]any)
		if vm["name"] == store && asMap(asMap(vm["efsVolumeConfiguration"])["authorizationConfig"])["accessPointId"] != capture.MockID("flock-bus-ap") {
			t.Errorf("the bus store is not on its own access point: %v", vm)
		}
	}
	if store == "" {
		t.Error("the bus has no writable store at /data")
	}
}

// The operator task: hardened, its own UID (the owner of common), the
// operator's credentials through secrets, common read-write through its own
// access point, no service (it runs on demand), the operator group.
func checkAWSOperator(t *testing.T, s *capture.Stack) {
	td := awsGet(t, s, capture.TypeTaskDefinition, "flock-operator-task")
	op := flock.DefaultUIDBase - 1
	c := checkAWSHardenedTask(t, td, op, flock.DefaultLimits)
	sec := awsGet(t, s, capture.TypeSecret, "flock-operator-nkey")
	if !reflect.DeepEqual(c.Secrets, []awsflock.Secret{{Name: protocol.EnvCLINkeySeed, ValueFrom: sec.MockARN()}}) {
		t.Errorf("operator secrets %+v", c.Secrets)
	}
	if env := c.Environment; !reflect.DeepEqual(env, []awsflock.KeyValue{{Name: "FLOCK_NATS_URL", Value: "nats://bus.flock.flock.internal:4222"}, {Name: "SHARED_DIR", Value: "/shared"}}) {
		t.Errorf("operator env %+v", env)
	}
	if _, ok := s.Get(capture.TypeService, "flock-operator"); ok {
		t.Error("the operator task runs as a service: it is run on demand")
	}
	key, _ := credentials.Derive([]byte(capture.TestSecret), "operator")
	if v := awsGet(t, s, capture.TypeSecretVersion, "flock-operator-nkey"); v.String("secretString") != key.Seed || !v.Inputs["secretString"].IsSecret() {
		t.Error("the operator secret does not hold the operator's seed as a Pulumi secret")
	}
	if s.Outputs["operatorTaskDefinition"].Value != td.String("family") || s.Outputs["operatorSecurityGroup"].Value != capture.MockID("flock-operator-sg") {
		t.Errorf("outputs name the operator task %v and group %v", s.Outputs["operatorTaskDefinition"], s.Outputs["operatorSecurityGroup"])
	}
}

// Each agent's access points are mounted by its task alone; an access point
// several tasks mount (common) is read-only in all of them.
func checkAWSAccessPointUse(t *testing.T, s *capture.Stack, ids []string) {
	users := map[string][]string{} // access point ID -> "task mode"
	for _, td := range s.ByType(capture.TypeTaskDefinition) {
		c := awsContainer(t, td)
		for _, v := range list(td, "volumes") {
			vm := v.(map[string]any)
			ap, _ := asMap(asMap(vm["efsVolumeConfiguration"])["authorizationConfig"])["accessPointId"].(string)
			if ap == "" {
				continue
			}
			for _, m := range c.MountPoints {
				if m.SourceVolume == vm["name"] {
					mode := "rw"
					if m.ReadOnly {
						mode = "ro"
					}
					users[ap] = append(users[ap], td.Name+" "+mode)
				}
			}
		}
	}
	for _, id := range ids {
		for _, ap := range []string{"dir-ap", "log-ap"} {
			if got := users[capture.MockID("flock-"+id+"-"+ap)]; !reflect.DeepEqual(got, []string{"flock-" + id + "-task rw"}) {
				t.Errorf("%s's %s is mounted by %v, want its task alone", id, ap, got)
			}
		}
	}
	for ap, us := range users {
		if len(us) < 2 {
			continue
		}
		for _, u := range us {
			if strings.HasSuffix(u, " rw") {
				t.Errorf("%s, shared by %d tasks, is mounted read-write by %s", ap, len(us), u)
			}
		}
	}
	if got := len(users[capture.MockID("flock-common-ap")]); got != len(ids) {
		t.Errorf("common is mounted by %d tasks, want every agent (%d)", got, len(ids))
	}
}

// Tags: the policy pack reads the docker labels' keys on aws resources.
func checkAWSTags(t *testing.T, s *capture.Stack, ids []string) {
	for _, typ := range []string{capture.TypeTaskDefinition, capture.TypeService, capture.TypeSecurityGroup, capture.TypeAccessPoint, capture.TypeRole, capture.TypeSecret, capture.TypeLogGroup} {
		for _, r := range s.ByType(typ) {
			tags := obj(r, "tags")
			if tags["ai-flock.flock"] != "flock" || tags["ai-flock.role"] == nil {
				t.Errorf("%s %s: tags %v", typ, r.Name, tags)
			}
			for _, id := range ids {
				if strings.HasPrefix(r.Name, "flock-"+id+"-") || r.Name == "flock-"+id {
					if tags["ai-flock.agent"] != id || tags["ai-flock.role"] != "agent" {
						t.Errorf("%s %s: tags %v, want agent %s", typ, r.Name, tags, id)
					}
				}
			}
		}
	}
	if tags := obj(awsGet(t, s, capture.TypeSecurityGroup, "flock-agents-sg"), "tags"); tags["ai-flock.role"] != "agent" {
		t.Errorf("the agents' group is tagged %v", tags)
	}
}

func awsAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

func awsStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// Adding an agent adds only its own resources; the only other change is the
// bus's config (its secret values and the digest that rolls the bus service).
func TestAWSAddingAnAgentChangesNoOtherAgent(t *testing.T) {
	three := awsStack(t, capture.Config{"flock:agentCount": "3"})
	four := awsStack(t, capture.Config{"flock:agentCount": "4"})
	changed, removed, added := changedBetween(three, four)
	if len(removed) != 0 {
		t.Errorf("removed %v", removed)
	}
	sort.Strings(changed)
	allowed := []string{"flock-bus", "flock-bus-config-1", "flock-bus-topology-1"}
	for _, c := range changed {
		if !containsStr(allowed, c) {
			t.Errorf("adding agent-4 changed %s", c)
		}
	}
	if !containsStr(changed, "flock-bus-config-1") {
		t.Error("the bus config did not gain agent-4")
	}
	for _, a := range added {
		if !strings.HasPrefix(a, "flock-agent-4") {
			t.Errorf("adding agent-4 added %s", a)
		}
	}
	for _, want := range []string{"flock-agent-4", "flock-agent-4-task", "flock-agent-4-dir-ap", "flock-agent-4-log-ap", "flock-agent-4-nkey", "flock-agent-4-exec-role", "flock-agent-4-task-role", "flock-agent-4-logs"} {
		if !containsStr(added, want) {
			t.Errorf("agent-4 lacks %s", want)
		}
	}
	// Removing an agent from the middle of a list removes its resources only.
	all := awsStack(t, capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"agent-2"},{"id":"researcher","slot":9}]`})
	fewer := awsStack(t, capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"researcher","slot":9}]`})
	changed, removed, added = changedBetween(all, fewer)
	for _, c := range changed {
		if !containsStr(allowed, c) {
			t.Errorf("removing agent-2 changed %s", c)
		}
	}
	if len(added) != 0 || len(removed) == 0 {
		t.Errorf("removing agent-2: added %v, removed %v", added, removed)
	}
	for _, r := range removed {
		if !strings.HasPrefix(r, "flock-agent-2") {
			t.Errorf("removing agent-2 removed %s", r)
		}
	}
	// And two runs of one config are identical (no churn, no rotation).
	again := awsStack(t, capture.Config{"flock:agentCount": "3"})
	if c, r, a := changedBetween(three, again); len(c)+len(r)+len(a) != 0 {
		t.Errorf("two runs differ: changed %v removed %v added %v", c, r, a)
	}
}

func TestAWSNATEgress(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:aws": `{"egress":"nat"}`})
	if len(s.ByType(capture.TypeVpcEndpoint)) != 0 || len(s.ByType(capture.TypeNatGateway)) != 1 || len(s.ByType(capture.TypeInternetGateway)) != 1 {
		t.Fatal("nat egress: want one NAT gateway and internet gateway, no endpoints")
	}
	route := awsGet(t, s, capture.TypeRoute, "flock-private-default")
	if route.String("natGatewayId") != capture.MockID("flock-nat") || route.String("routeTableId") != capture.MockID("flock-private-rt") {
		t.Errorf("private default route %v", route.Inputs)
	}
	pub := awsGet(t, s, capture.TypeSubnet, "flock-public-1")
	if boolean(pub, "mapPublicIpOnLaunch") {
		t.Error("the NAT's subnet maps public IPs")
	}
	for _, r := range awsSGRules(t, s) {
		if r.kind == "ingress" && strings.Contains(r.peer, "0.0.0.0/0") {
			t.Errorf("%s admits the internet", r.sg)
		}
	}
	svc := awsGet(t, s, capture.TypeService, "flock-agent-1")
	if !dependsOn(svc, capture.Resource{Name: "flock-private-default"}) || obj(svc, "networkConfiguration")["assignPublicIp"] != false {
		t.Error("agents must wait for the NAT route and get no public IP")
	}
}

func TestAWSExistingVPC(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:aws": `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`})
	for _, typ := range []string{capture.TypeVpc, capture.TypeSubnet, capture.TypeRouteTable} {
		if len(s.ByType(typ)) != 0 {
			t.Errorf("an existing VPC, yet the stack declares a %s", typ)
		}
	}
	if g := awsGet(t, s, capture.TypeSecurityGroup, "flock-agents-sg"); g.String("vpcId") != "vpc-0123456789abcdef0" {
		t.Errorf("agents group in %s", g.String("vpcId"))
	}
	nc := obj(awsGet(t, s, capture.TypeService, "flock-agent-2"), "networkConfiguration")
	if !reflect.DeepEqual(nc["subnets"], []any{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"}) {
		t.Errorf("agent-2 runs in %v", nc["subnets"])
	}
	if ep := awsGet(t, s, capture.TypeVpcEndpoint, "flock-endpoint-s3"); !reflect.DeepEqual(list(ep, "routeTableIds"), []any{"rtb-0cccccccccccccccc"}) {
		t.Errorf("S3 endpoint on %v", list(ep, "routeTableIds"))
	}
}
