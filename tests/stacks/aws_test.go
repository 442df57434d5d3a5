package stacks_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack under the mock engine: every invariant for 3 and 50
// agents. Resources are found by name (<flock>-<agent>-<part>) and checked
// against each other through the mock IDs and ARNs, so a policy or a task
// that names another agent's resource fails.

func awsStack(t testing.TB, overrides capture.Config) *capture.Stack {
	t.Helper()
	return captured(t, "aws", overrides)
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
		for _, b := range []awsBus{{nodes: 1}, {nodes: 3}} {
			t.Run(fmt.Sprintf("%d agents, %d bus nodes", n, b.nodes), func(t *testing.T) {
				s := awsStack(t, b.config(capture.Config{"flock:agentCount": strconv.Itoa(n)}))
				ids := awsAgentIDs(n)
				checkAWSComponent(t, s)
				checkAWSNetwork(t, s)
				checkAWSSecurityGroups(t, s, b)
				checkAWSStorage(t, s, ids, b)
				checkAWSCluster(t, s, b)
				checkAWSAgentTasks(t, s, ids, b)
				checkAWSServices(t, s, ids, b)
				checkAWSFlockServices(t, s, ids, b)
				checkAWSIAM(t, s, ids, b)
				checkAWSImages(t, s)
				checkAWSSecrets(t, s, ids)
				checkAWSBus(t, s, ids, b)
				checkAWSOperator(t, s, b)
				checkAWSAccessPointUse(t, s, ids)
				checkAWSTags(t, s, ids)
			})
		}
	}
}

// awsBus is the shape of the bus a stack under test has: 1 node (bus.<ns>,
// its store on EFS) or 3 (bus-<n>.<ns>, each store on its own task storage).
type awsBus struct{ nodes int }

// config sets flock:bus.replicas on top of other keys.
func (b awsBus) config(c capture.Config) capture.Config {
	c["flock:bus"] = fmt.Sprintf(`{"replicas": %d}`, b.nodes)
	return c
}

// keys name the nodes' resources: flock-<key>, flock-<key>-task, ...
func (b awsBus) keys() []string {
	if b.nodes == 1 {
		return []string{"bus"}
	}
	var out []string
	for n := 1; n <= b.nodes; n++ {
		out = append(out, "bus-"+strconv.Itoa(n))
	}
	return out
}

// url is what agents and the operator connect to: every node, in order.
func (b awsBus) url() string {
	var urls []string
	for _, k := range b.keys() {
		urls = append(urls, "nats://"+k+".flock.flock.internal:4222")
	}
	return strings.Join(urls, ",")
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

var awsSeedPattern = regexp.MustCompile(`S[UO][A-Z2-7]{50,}`)

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

// Adding an agent adds only its own resources; the only other change is
// the bus's config (each node's secret values and the digest that rolls its
// service): no bus node, secret or store is replaced or removed.
func TestAWSAddingAnAgentChangesNoOtherAgent(t *testing.T) {
	for _, b := range []awsBus{{nodes: 1}, {nodes: 3}} {
		t.Run(fmt.Sprintf("%d bus nodes", b.nodes), func(t *testing.T) {
			checkAWSNoChurn(t, b)
		})
	}
}

func checkAWSNoChurn(t *testing.T, b awsBus) {
	three := awsStack(t, b.config(capture.Config{"flock:agentCount": "3"}))
	four := awsStack(t, b.config(capture.Config{"flock:agentCount": "4"}))
	changed, removed, added := changedBetween(three, four)
	if len(removed) != 0 {
		t.Errorf("removed %v", removed)
	}
	sort.Strings(changed)
	// The file system's size alarm fires at every agent's diskMiB plus 1 GiB
	// by default: an agent more moves its threshold, in place.
	allowed := []string{"flock-efs-size"}
	for _, k := range b.keys() {
		allowed = append(allowed, "flock-"+k, "flock-"+k+"-config-1", "flock-"+k+"-topology-1", "flock-"+k+"-rollout")
	}
	for _, c := range changed {
		if !slices.Contains(allowed, c) {
			t.Errorf("adding agent-4 changed %s", c)
		}
	}
	before, _ := three.Get(awsrules.TypeMetricAlarm, "flock-efs-size")
	after, _ := four.Get(awsrules.TypeMetricAlarm, "flock-efs-size")
	for key, v := range before.Inputs {
		if key != "threshold" && key != "alarmDescription" && !v.DeepEquals(after.Inputs[key]) {
			t.Errorf("adding agent-4 changed the size alarm's %s", key)
		}
	}
	if got, want := after.Inputs["threshold"].NumberValue()-before.Inputs["threshold"].NumberValue(), float64(1<<30); got != want {
		t.Errorf("adding an agent of 1 GiB moved the size alarm by %v bytes, want %v", got, want)
	}
	for _, k := range b.keys() {
		if !slices.Contains(changed, "flock-"+k+"-config-1") {
			t.Errorf("the config of %s did not gain agent-4", k)
		}
		// The node's service is updated in place (its trigger rolls the
		// task), never replaced: only its triggers differ.
		before, _ := three.Get(awsrules.TypeService, "flock-"+k)
		after, _ := four.Get(awsrules.TypeService, "flock-"+k)
		for key, v := range before.Inputs {
			if key != "triggers" && !v.DeepEquals(after.Inputs[key]) {
				t.Errorf("adding agent-4 changed %s's %s", k, key)
			}
		}
		if before.Inputs["triggers"].DeepEquals(after.Inputs["triggers"]) {
			t.Errorf("%s's triggers did not change: the node would keep the old config", k)
		}
	}
	for _, a := range added {
		if !strings.HasPrefix(a, "flock-agent-4") {
			t.Errorf("adding agent-4 added %s", a)
		}
	}
	for _, want := range []string{"flock-agent-4", "flock-agent-4-task", "flock-agent-4-dir-ap", "flock-agent-4-log-ap", "flock-agent-4-nkey", "flock-agent-4-exec-role", "flock-agent-4-task-role", "flock-agent-4-logs"} {
		if !slices.Contains(added, want) {
			t.Errorf("agent-4 lacks %s", want)
		}
	}
	// Removing an agent from the middle of a list removes its resources only.
	all := awsStack(t, b.config(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"agent-2"},{"id":"researcher","slot":9}]`}))
	fewer := awsStack(t, b.config(capture.Config{"flock:agentCount": "", "flock:agents": `[{"id":"agent-1"},{"id":"researcher","slot":9}]`}))
	changed, removed, added = changedBetween(all, fewer)
	for _, c := range changed {
		if !slices.Contains(allowed, c) {
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
	again := awsStack(t, b.config(capture.Config{"flock:agentCount": "3"}))
	if c, r, a := changedBetween(three, again); len(c)+len(r)+len(a) != 0 {
		t.Errorf("two runs differ: changed %v removed %v added %v", c, r, a)
	}
}

func TestAWSNATEgress(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:aws": `{"egress":"nat"}`})
	if len(s.ByType(awsrules.TypeVpcEndpoint)) != 0 || len(s.ByType(awsrules.TypeNatGateway)) != 1 || len(s.ByType(awsrules.TypeInternetGateway)) != 1 {
		t.Fatal("nat egress: want one NAT gateway and internet gateway, no endpoints")
	}
	route := awsGet(t, s, awsrules.TypeRoute, "flock-private-default")
	if route.String("natGatewayId") != capture.MockID("flock-nat") || route.String("routeTableId") != capture.MockID("flock-private-rt") {
		t.Errorf("private default route %v", route.Inputs)
	}
	pub := awsGet(t, s, awsrules.TypeSubnet, "flock-public-1")
	if boolean(pub, "mapPublicIpOnLaunch") {
		t.Error("the NAT's subnet maps public IPs")
	}
	for _, r := range awsSGRules(t, s) {
		if r.kind == "ingress" && strings.Contains(r.peer, "0.0.0.0/0") {
			t.Errorf("%s admits the internet", r.sg)
		}
	}
	svc := awsGet(t, s, awsrules.TypeService, "flock-agent-1")
	if !dependsOn(svc, capture.Resource{Name: "flock-private-default"}) || obj(svc, "networkConfiguration")["assignPublicIp"] != false {
		t.Error("agents must wait for the NAT route and get no public IP")
	}
}

func TestAWSExistingVPC(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:aws": `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`})
	for _, typ := range []string{awsrules.TypeVpc, awsrules.TypeSubnet, awsrules.TypeRouteTable} {
		if len(s.ByType(typ)) != 0 {
			t.Errorf("an existing VPC, yet the stack declares a %s", typ)
		}
	}
	if g := awsGet(t, s, awsrules.TypeSecurityGroup, "flock-agents-sg"); g.String("vpcId") != "vpc-0123456789abcdef0" {
		t.Errorf("agents group in %s", g.String("vpcId"))
	}
	nc := obj(awsGet(t, s, awsrules.TypeService, "flock-agent-2"), "networkConfiguration")
	if !reflect.DeepEqual(nc["subnets"], []any{"subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"}) {
		t.Errorf("agent-2 runs in %v", nc["subnets"])
	}
	if ep := awsGet(t, s, awsrules.TypeVpcEndpoint, "flock-endpoint-s3"); !reflect.DeepEqual(list(ep, "routeTableIds"), []any{"rtb-0cccccccccccccccc"}) {
		t.Errorf("S3 endpoint on %v", list(ep, "routeTableIds"))
	}
}
