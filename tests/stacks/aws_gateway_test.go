package stacks_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The model gateway on the aws target: its service in subnets of its own
// with the flock's one route out (a NAT gateway), agents in subnets with
// none; agents known by a per-agent token that reaches them only through
// Secrets Manager; the upstream keys in the gateway's own secrets and in no
// plain input anywhere.

// awsGatewayStack captures the aws stack with a gateway (the anthropic
// upstream, its key a secret) on top of Pulumi.aws.yaml and overrides.
func awsGatewayStack(t testing.TB, overrides capture.Config) *capture.Stack {
	t.Helper()
	s, err := runAWSGateway(overrides)
	if err != nil {
		t.Fatalf("aws stack with a gateway: %v", err)
	}
	return s
}

func runAWSGateway(overrides capture.Config) (*capture.Stack, error) {
	cfg := withGateway(capture.Config{}, "")
	for k, v := range overrides {
		cfg[k] = v // an empty value removes the key, the gateway's too
	}
	return capture.RunStack("aws", cfg, "flock:anthropicApiKey")
}

// awsGatewayUID is the gateway's UID: flock:uidBase + the pool's last slot.
const awsGatewayUID = flock.DefaultUIDBase + 8191

func TestAWSGateway(t *testing.T) {
	for _, n := range []int{3, 50} {
		for _, b := range []awsBus{{nodes: 1}, {nodes: 3}} {
			t.Run(fmt.Sprintf("%d agents, %d bus nodes", n, b.nodes), func(t *testing.T) {
				s := awsGatewayStack(t, b.config(capture.Config{"flock:agentCount": fmt.Sprint(n), "flock:gateway": `{"upstreams": {"anthropic": {}}, "budgetTokens": 5000}`}))
				ids := awsAgentIDs(n)
				checkAWSComponent(t, s)
				checkAWSTags(t, s, ids)
				checkAWSGatewayNetwork(t, s)
				checkAWSGatewaySecurityGroups(t, s, b)
				checkAWSGatewayService(t, s, b)
				checkAWSGatewayTask(t, s, ids, b)
				checkAWSGatewayAgents(t, s, ids)
				checkAWSGatewayNoPlainCredential(t, s, ids)
			})
		}
	}
}

// The route out is the gateway's alone: a NAT gateway in a public subnet,
// and a route table of the gateway's own, on subnets of its own (one per
// zone), sending everything there. The private subnets' table has no route.
func checkAWSGatewayNetwork(t *testing.T, s *capture.Stack) {
	routes := map[string]string{} // route table -> its default route's target
	for _, r := range s.ByType(awsrules.TypeRoute) {
		if r.String("destinationCidrBlock") != "0.0.0.0/0" {
			t.Errorf("%s: route to %s", r.Name, r.String("destinationCidrBlock"))
		}
		target := r.String("natGatewayId") + r.String("gatewayId")
		if _, dup := routes[r.String("routeTableId")]; dup {
			t.Errorf("%s: a second route in %s", r.Name, r.String("routeTableId"))
		}
		routes[r.String("routeTableId")] = target
	}
	want := map[string]string{
		capture.MockID("flock-public-rt"): capture.MockID("flock-igw"),
		capture.MockID("flock-egress-rt"): capture.MockID("flock-nat"),
	}
	if !reflect.DeepEqual(routes, want) {
		t.Errorf("routes %v, want %v: only the public subnet (the NAT gateway's) and the gateway's subnets route out", routes, want)
	}
	assoc := map[string]string{}
	for _, a := range s.ByType(awsrules.TypeRouteTableAssociation) {
		assoc[a.String("subnetId")] = a.String("routeTableId")
	}
	subnets := map[string]string{}
	for _, sub := range s.ByType(awsrules.TypeSubnet) {
		if boolean(sub, "mapPublicIpOnLaunch") {
			t.Errorf("%s maps public IPs", sub.Name)
		}
		subnets[sub.Name] = sub.String("cidrBlock") + " " + sub.String("availabilityZone") + " " + strings.TrimSuffix(strings.TrimPrefix(assoc[capture.MockID(sub.Name)], "flock-"), "-id")
	}
	wantSubnets := map[string]string{
		"flock-private-1": "10.220.0.0/20 eu-west-1a private-rt",
		"flock-private-2": "10.220.16.0/20 eu-west-1b private-rt",
		"flock-egress-1":  "10.220.128.0/20 eu-west-1a egress-rt",
		"flock-egress-2":  "10.220.144.0/20 eu-west-1b egress-rt",
		"flock-public-1":  "10.220.240.0/20 eu-west-1a public-rt",
	}
	if !reflect.DeepEqual(subnets, wantSubnets) {
		t.Errorf("subnets\n got %v\nwant %v", subnets, wantSubnets)
	}
	for _, name := range []string{"flock-egress-rt", "flock-egress-1", "flock-egress-2"} {
		typ := awsrules.TypeSubnet
		if strings.HasSuffix(name, "-rt") {
			typ = awsrules.TypeRouteTable
		}
		if role := obj(awsGet(t, s, typ, name), "tags")["ai-flock.role"]; role != protocol.RoleEgress {
			t.Errorf("%s is tagged role %v, want %s", name, role, protocol.RoleEgress)
		}
	}
	nat := awsGet(t, s, awsrules.TypeNatGateway, "flock-nat")
	if nat.String("subnetId") != capture.MockID("flock-public-1") {
		t.Errorf("the NAT gateway is in %s", nat.String("subnetId"))
	}
	// The endpoints stay: agents, the bus and the operator reach AWS through
	// them; the S3 endpoint serves the gateway's table too (image layers).
	if n := len(s.ByType(awsrules.TypeVpcEndpoint)); n != 5 {
		t.Errorf("%d endpoints, want the 4 interface endpoints and S3", n)
	}
	s3 := awsGet(t, s, awsrules.TypeVpcEndpoint, "flock-endpoint-s3")
	if !reflect.DeepEqual(list(s3, "routeTableIds"), []any{capture.MockID("flock-private-rt"), capture.MockID("flock-egress-rt")}) {
		t.Errorf("S3 endpoint on %v", list(s3, "routeTableIds"))
	}
}

// The gateway's group admits 8080 from the agents' only, and reaches 443
// anywhere (its NAT route) and the bus; agents gain 8080 to the gateway and
// nothing else; the bus and the endpoints admit the gateway. No other group
// reaches 0.0.0.0/0.
func checkAWSGatewaySecurityGroups(t *testing.T, s *capture.Stack, b awsBus) {
	got := map[string][]string{}
	for _, r := range awsSGRules(t, s) {
		k := r.sg + " " + r.kind
		got[k] = append(got[k], fmt.Sprintf("%d %s", r.port, r.peer))
		if strings.Contains(r.peer, "0.0.0.0/0") && (r.sg != "gateway" || r.kind != "egress" || r.port != 443) {
			t.Errorf("%s %s %d reaches %s: only the gateway has a route out", r.sg, r.kind, r.port, r.peer)
		}
	}
	for k := range got {
		sort.Strings(got[k])
	}
	s3 := "[" + capture.MockPrefixS3 + "]"
	want := map[string][]string{
		"agents egress":     {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints", "8080 gateway"},
		"operator egress":   {"2049 efs", "4222 bus", "443 " + s3, "443 endpoints", "8222 bus"},
		"bus ingress":       {"4222 agents", "4222 gateway", "4222 operator", "4222 services", "8222 operator"},
		"bus egress":        {"2049 efs", "443 " + s3, "443 endpoints"},
		"efs ingress":       {"2049 agents", "2049 bus", "2049 operator"},
		"endpoints ingress": {"443 agents", "443 bus", "443 gateway", "443 operator", "443 services"},
		"gateway ingress":   {"8080 agents"},
		"gateway egress":    {"4222 bus", "443 [0.0.0.0/0]"},
		"services egress":   {"4222 bus", "443 " + s3, "443 endpoints"},
	}
	if b.nodes > 1 {
		want["bus ingress"] = []string{"4222 agents", "4222 gateway", "4222 operator", "4222 services", "6222 bus", "8222 operator"}
		want["bus egress"] = []string{"443 " + s3, "443 endpoints", "6222 bus"}
		want["efs ingress"] = []string{"2049 agents", "2049 operator"}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("security group rules\n got %v\nwant %v", got, want)
	}
	if role := obj(awsGet(t, s, awsrules.TypeSecurityGroup, "flock-gateway-sg"), "tags")["ai-flock.role"]; role != protocol.RoleGateway {
		t.Errorf("the gateway's group is tagged role %v", role)
	}
}

// <flock>-gateway: one task, never two, circuit breaker, no public IP, no
// exec; in the gateway's subnets and group; gateway.<namespace> in Cloud
// Map; started once its route out exists.
func checkAWSGatewayService(t *testing.T, s *capture.Stack, b awsBus) {
	svc := awsGet(t, s, awsrules.TypeService, "flock-gateway")
	nc, cb := obj(svc, "networkConfiguration"), obj(svc, "deploymentCircuitBreaker")
	if svc.String("name") != "flock-gateway" || num(svc, "desiredCount") != 1 || svc.String("launchType") != "FARGATE" ||
		svc.String("taskDefinition") != awsGet(t, s, awsrules.TypeTaskDefinition, "flock-gateway-task").MockARN() ||
		num(svc, "deploymentMaximumPercent") != 100 || boolean(svc, "enableExecuteCommand") || cb["enable"] != true || cb["rollback"] != true {
		t.Errorf("gateway service %v", svc.Inputs)
	}
	if nc["assignPublicIp"] != false || !reflect.DeepEqual(nc["securityGroups"], []any{capture.MockID("flock-gateway-sg")}) ||
		!reflect.DeepEqual(nc["subnets"], []any{capture.MockID("flock-egress-1"), capture.MockID("flock-egress-2")}) {
		t.Errorf("gateway network %v: want its own subnets and group, no public IP", nc)
	}
	disc := awsGet(t, s, awsrules.TypeDiscoveryService, "flock-gateway-discovery")
	if obj(svc, "serviceRegistries")["registryArn"] != disc.MockARN() || disc.String("name") != "gateway" ||
		obj(disc, "dnsConfig")["namespaceId"] != capture.MockID("flock-namespace") {
		t.Errorf("the gateway is not gateway.<namespace>: %v %v", obj(svc, "serviceRegistries"), disc.Inputs)
	}
	// After the bus (its last node, steady): it publishes usage there.
	for _, dep := range []string{"flock-egress-default", "flock-gateway-exec-policy", "flock-gateway-config-1", "flock-gateway-key-anthropic", "flock-gateway-nkey", "flock-endpoint-secretsmanager", "flock-" + b.keys()[len(b.keys())-1]} {
		if !dependsOn(svc, capture.Resource{Name: dep}) {
			t.Errorf("the gateway does not wait for %s", dep)
		}
	}
	if awsflock.GatewayURL("flock.flock.internal") != "http://gateway.flock.flock.internal:8080" {
		t.Errorf("GatewayURL %s", awsflock.GatewayURL("flock.flock.internal"))
	}
}

// The gateway's task: hardened like the bus, its own UID; its keys, seed and
// config through secrets only its execution role reads; a config listing
// every agent's token hash, each the SHA-256 of credentials.GatewayToken.
func checkAWSGatewayTask(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-gateway-task")
	c := checkAWSHardenedTask(t, td, awsGatewayUID, flock.DefaultModelGatewayLimits)
	if c.Name != "gateway" || c.Image != capture.MockRegistry()+"/flock-images@"+capture.MockDigest("flock-gateway-image") {
		t.Errorf("gateway container %q runs %q", c.Name, c.Image)
	}
	if c.HealthCheck == nil || !reflect.DeepEqual(c.HealthCheck.Command, []string{"CMD", "/flock-gateway", "health"}) {
		t.Errorf("gateway health check %+v", c.HealthCheck)
	}
	if !reflect.DeepEqual(c.PortMappings, []awsflock.PortMapping{{ContainerPort: 8080, HostPort: 8080, Protocol: "tcp", Name: "gateway"}}) {
		t.Errorf("gateway ports %+v", c.PortMappings)
	}
	lg := awsGet(t, s, awsrules.TypeLogGroup, "flock-gateway-logs")
	if lg.String("name") != "/ai-flock/aws/flock/gateway" || c.LogConfiguration.Options["awslogs-group"] != lg.String("name") {
		t.Errorf("gateway logs to %q (its group %q)", c.LogConfiguration.Options["awslogs-group"], lg.String("name"))
	}
	for _, v := range list(td, "volumes") {
		if asMap(v)["efsVolumeConfiguration"] != nil {
			t.Errorf("the gateway mounts EFS: %v", v)
		}
	}
	if td.String("executionRoleArn") != awsGet(t, s, awsrules.TypeRole, "flock-gateway-exec-role").MockARN() ||
		td.String("taskRoleArn") != awsGet(t, s, awsrules.TypeRole, "flock-gateway-task-role").MockARN() {
		t.Errorf("gateway roles %s %s", td.String("executionRoleArn"), td.String("taskRoleArn"))
	}
	if _, ok := s.Get(awsrules.TypeRolePolicy, "flock-gateway-task-policy"); ok {
		t.Error("the gateway's task role is granted something: it needs no AWS access")
	}
	img := awsGet(t, s, capture.TypeImage, "flock-gateway-image")
	if obj(img, "build")["target"] != "gateway" || !strings.HasPrefix(img.String("imageName"), capture.MockRegistry()+"/flock-images:gateway-c") {
		t.Errorf("gateway image %v %q", obj(img, "build"), img.String("imageName"))
	}
	if !strings.Contains(awsGet(t, s, awsrules.TypeLifecyclePolicy, "flock-images-lifecycle").String("policy"), `"tagPrefixList":["gateway-"]`) {
		t.Error("the lifecycle policy does not expire old gateway images")
	}

	// Its environment: the count of config parts; everything else is a secret of its own.
	env := map[string]string{}
	for _, e := range c.Environment {
		env[e.Name] = e.Value
	}
	if !reflect.DeepEqual(env, map[string]string{"FLOCK_GATEWAY_CONFIG_DATA_PARTS": "1"}) {
		t.Errorf("gateway env %v", env)
	}
	values := map[string]string{"FLOCK_GATEWAY_CONFIG_DATA_PARTS": "1"}
	byEnv := map[string]string{}
	var arns []string
	for _, sec := range c.Secrets {
		for _, r := range s.ByType(awsrules.TypeSecret) {
			if r.MockARN() == sec.ValueFrom {
				byEnv[sec.Name] = r.Name
				v := awsGet(t, s, awsrules.TypeSecretVersion, r.Name)
				values[sec.Name] = v.String("secretString")
				if !v.Inputs["secretString"].IsSecret() || obj(r, "tags")["ai-flock.role"] != "gateway" {
					t.Errorf("%s: not a Pulumi secret, or not tagged the gateway's", r.Name)
				}
			}
		}
		arns = append(arns, sec.ValueFrom)
	}
	wantSecrets := map[string]string{
		"FLOCK_GATEWAY_KEY_ANTHROPIC":      "flock-gateway-key-anthropic",
		awsflock.GatewayNkeyEnv:            "flock-gateway-nkey",
		"FLOCK_GATEWAY_CONFIG_DATA_PART_1": "flock-gateway-config-1",
	}
	if !reflect.DeepEqual(byEnv, wantSecrets) {
		t.Errorf("gateway secrets %v, want %v", byEnv, wantSecrets)
	}
	seed, _ := credentials.Derive([]byte(capture.TestSecret), protocol.GatewayUser)
	if values["FLOCK_GATEWAY_KEY_ANTHROPIC"] != testKey || values[awsflock.GatewayNkeyEnv] != seed.Seed {
		t.Error("the gateway's secrets do not hold the upstream key and its bus seed")
	}
	// Its execution role reads exactly these.
	sort.Strings(arns)
	var read []string
	for _, st := range awsPolicy(t, awsGet(t, s, awsrules.TypeRolePolicy, "flock-gateway-exec-policy"), "policy").Statement {
		if slicesContain(st.Action, "secretsmanager:GetSecretValue") {
			read = append(read, st.Resource...)
		}
	}
	if !reflect.DeepEqual(read, arns) {
		t.Errorf("the gateway's execution role reads %v, want its own secrets %v", read, arns)
	}

	// The config, reassembled as the gateway does.
	raw, ok, err := protocol.DecodeEnv(protocol.EnvGatewayConfigData, func(k string) string { return values[k] })
	if !ok || err != nil {
		t.Fatalf("gateway config does not reassemble: %v %v", ok, err)
	}
	var conf protocol.GatewayConfig
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	if conf.Callers != protocol.CallersByToken || conf.NATSURL != b.url() || conf.NkeyEnv != awsflock.GatewayNkeyEnv || conf.NkeyFile != "" || conf.Flock != "flock" {
		t.Errorf("gateway config: callers %q nats %q nkeyEnv %q nkeyFile %q", conf.Callers, conf.NATSURL, conf.NkeyEnv, conf.NkeyFile)
	}
	if !reflect.DeepEqual(conf.Upstreams, []protocol.GatewayUpstream{{Name: "anthropic", API: "anthropic", URL: "https://api.anthropic.com", KeyHeader: "x-api-key", KeyEnv: "FLOCK_GATEWAY_KEY_ANTHROPIC"}}) {
		t.Errorf("gateway upstreams %+v", conf.Upstreams)
	}
	if len(conf.Agents) != len(ids) {
		t.Fatalf("gateway config lists %d agents, want %d", len(conf.Agents), len(ids))
	}
	for i, id := range ids {
		a := conf.Agents[i]
		token, err := credentials.GatewayToken([]byte(capture.TestSecret), id)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(token))
		if a.ID != id || a.TokenSHA256 != hex.EncodeToString(sum[:]) || a.BudgetTokens != 5000 || a.Network != "" {
			t.Errorf("gateway config agent %d: %+v, want %s with the hash of its token and a budget of 5000", i, a, id)
		}
		if strings.Contains(string(raw), token) {
			t.Errorf("the gateway config holds %s's token itself", id)
		}
	}
	if strings.Contains(string(raw), testKey) || awsSeedPattern.Match(raw) {
		t.Error("the gateway config holds a key or a seed")
	}
}

// Agents: the variables pointing the SDKs at gateway.<namespace>, their
// token as FLOCK_GATEWAY_TOKEN and ANTHROPIC_API_KEY from a secret of their own (its value
// credentials.GatewayToken), never in the environment; no proxy; their
// execution role reads their seed and token and nothing else.
func checkAWSGatewayAgents(t *testing.T, s *capture.Stack, ids []string) {
	for _, id := range ids {
		c := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+id+"-task"))
		env := map[string]string{}
		for _, e := range c.Environment {
			env[e.Name] = e.Value
		}
		if env["FLOCK_GATEWAY_URL"] != "http://gateway.flock.flock.internal:8080" || env["ANTHROPIC_BASE_URL"] != "http://gateway.flock.flock.internal:8080/anthropic" {
			t.Errorf("%s: gateway variables %v", id, env)
		}
		for _, k := range []string{protocol.EnvGatewayToken, protocol.EnvAnthropicAPIKey, "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "OPENAI_BASE_URL"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s: %s in the plain environment", id, k)
			}
		}
		nkey, tok := awsGet(t, s, awsrules.TypeSecret, "flock-"+id+"-nkey"), awsGet(t, s, awsrules.TypeSecret, "flock-"+id+"-gateway-token")
		// The SDKs' key variable holds the token too: a stock SDK sends it.
		want := []awsflock.Secret{{Name: protocol.EnvNkeySeed, ValueFrom: nkey.MockARN()}, {Name: protocol.EnvGatewayToken, ValueFrom: tok.MockARN()},
			{Name: protocol.EnvAnthropicAPIKey, ValueFrom: tok.MockARN()}}
		if !reflect.DeepEqual(c.Secrets, want) {
			t.Errorf("%s: secrets %+v, want %+v", id, c.Secrets, want)
		}
		token, _ := credentials.GatewayToken([]byte(capture.TestSecret), id)
		v := awsGet(t, s, awsrules.TypeSecretVersion, "flock-"+id+"-gateway-token")
		if !v.Inputs["secretString"].IsSecret() || v.String("secretString") != token || obj(tok, "tags")["ai-flock.agent"] != id {
			t.Errorf("%s: its token secret does not hold its token as a Pulumi secret", id)
		}
		var read []string
		for _, st := range awsPolicy(t, awsGet(t, s, awsrules.TypeRolePolicy, "flock-"+id+"-exec-policy"), "policy").Statement {
			if slicesContain(st.Action, "secretsmanager:GetSecretValue") {
				read = append(read, st.Resource...)
			}
		}
		wantRead := []string{nkey.MockARN(), tok.MockARN()}
		sort.Strings(wantRead)
		if !reflect.DeepEqual(read, wantRead) {
			t.Errorf("%s: its execution role reads %v, want its seed and token %v", id, read, wantRead)
		}
		svc := awsGet(t, s, awsrules.TypeService, "flock-"+id)
		if obj(svc, "triggers")["gatewayToken"] == nil {
			t.Errorf("%s: no trigger rolls it when its token changes", id)
		}
		if nc := obj(svc, "networkConfiguration"); !reflect.DeepEqual(nc["subnets"], []any{capture.MockID("flock-private-1"), capture.MockID("flock-private-2")}) {
			t.Errorf("%s runs in %v, not the private subnets", id, nc["subnets"])
		}
	}
}

// No credential in plain text: the upstream key, the gateway's seed and
// every agent's token appear in no input that is not a Pulumi secret.
func checkAWSGatewayNoPlainCredential(t *testing.T, s *capture.Stack, ids []string) {
	seed, _ := credentials.Derive([]byte(capture.TestSecret), protocol.GatewayUser)
	creds := map[string]string{"the anthropic key": testKey, "the gateway's seed": seed.Seed}
	for _, id := range ids {
		creds[id+"'s token"], _ = credentials.GatewayToken([]byte(capture.TestSecret), id)
	}
	for _, r := range s.Resources {
		var strs []string
		for _, v := range r.Inputs {
			plainStrings(v, &strs)
		}
		for _, v := range strs {
			for what, c := range creds {
				if strings.Contains(v, c) {
					t.Errorf("%s %s holds %s in a plain input", r.Type, r.Name, what)
				}
			}
		}
	}
	for name, o := range s.Outputs {
		for what, c := range creds {
			if !o.Secret && strings.Contains(fmt.Sprint(o.Value), c) {
				t.Errorf("output %s holds %s", name, what)
			}
		}
	}
}

func slicesContain(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// Adding an agent adds its own resources (its token secret among them);
// besides the bus's config, only the gateway's config secret and the digest
// that rolls the gateway service change. The gateway's task definition,
// roles, group, subnets and keys stay; nothing is removed.
func TestAWSGatewayAddingAnAgent(t *testing.T) {
	for _, b := range []awsBus{{nodes: 1}, {nodes: 3}} {
		t.Run(fmt.Sprintf("%d bus nodes", b.nodes), func(t *testing.T) {
			three := awsGatewayStack(t, b.config(capture.Config{"flock:agentCount": "3"}))
			four := awsGatewayStack(t, b.config(capture.Config{"flock:agentCount": "4"}))
			changed, removed, added := changedBetween(three, four)
			if len(removed) != 0 {
				t.Errorf("removed %v", removed)
			}
			// The size alarm: see checkAWSNoChurn; a service that rolls has its
			// rollout checked again.
			allowed := []string{"flock-gateway", "flock-gateway-config-1", "flock-gateway-rollout", "flock-efs-size"}
			for _, k := range b.keys() {
				allowed = append(allowed, "flock-"+k, "flock-"+k+"-config-1", "flock-"+k+"-topology-1", "flock-"+k+"-rollout")
			}
			sort.Strings(changed)
			for _, c := range changed {
				if !slices.Contains(allowed, c) {
					t.Errorf("adding agent-4 changed %s", c)
				}
			}
			if !slices.Contains(changed, "flock-gateway-config-1") || !slices.Contains(changed, "flock-gateway") {
				t.Errorf("changed %v: the gateway's config must gain agent-4 and roll the gateway", changed)
			}
			before, after := awsGet(t, three, awsrules.TypeService, "flock-gateway"), awsGet(t, four, awsrules.TypeService, "flock-gateway")
			for key, v := range before.Inputs {
				if key != "triggers" && !v.DeepEquals(after.Inputs[key]) {
					t.Errorf("adding agent-4 changed the gateway service's %s", key)
				}
			}
			for _, a := range added {
				if !strings.HasPrefix(a, "flock-agent-4") {
					t.Errorf("adding agent-4 added %s", a)
				}
			}
			if !slices.Contains(added, "flock-agent-4-gateway-token") {
				t.Errorf("agent-4 has no token secret (added %v)", added)
			}
		})
	}
}

// What the aws gateway does not support, or an egress rule that would open
// the VPC itself, is refused, each naming its key.
func TestAWSGatewayConfigRules(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  capture.Config
		want []string
	}{
		{"egress rule opening the VPC", capture.Config{"flock:gateway": `{"upstreams": {"anthropic": {}}, "egress": [{"host": "registry.corp.example", "privateRanges": ["10.220.4.0/24"]}]}`},
			[]string{`flock:gateway.egress: rule for host "registry.corp.example": privateRanges 10.220.4.0/24 overlaps the VPC's range 10.220.0.0/16`}},
		{"nat egress", capture.Config{"flock:aws": `{"egress": "nat"}`},
			[]string{`flock:aws.egress: must be "endpoints" with flock:gateway`}},
		{"existing VPC", capture.Config{"flock:aws": `{"vpcId":"vpc-0123456789abcdef0","subnetIds":["subnet-0aaaaaaaaaaaaaaaa","subnet-0bbbbbbbbbbbbbbbb"],"routeTableIds":["rtb-0cccccccccccccccc"]}`},
			[]string{"flock:aws.vpcId: must be unset with flock:gateway"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := runAWSGateway(c.cfg)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("want %q in:\n%v", w, err)
				}
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Error("the error repeats the key")
			}
		})
	}
}
