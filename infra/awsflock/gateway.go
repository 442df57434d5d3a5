package awsflock

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/secretsmanager"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/dnsfirewall"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/infra/gatewayconfig"
	"github.com/ai-flock/ai-flock/protocol"
)

// The model gateway on the aws target (README: "The model gateway"): one
// Fargate service, <flock>-gateway, found as gateway.<namespace>, in subnets
// of its own whose route table sends everything to a NAT gateway: the flock's
// one route out. Agents keep the private subnets, which have none, and reach
// it on 8080 through its security group. They share one security group and
// one network, so the gateway knows a caller by its gateway token (an HMAC
// of the bus secret per agent, in Secrets Manager, injected as
// FLOCK_GATEWAY_TOKEN); it holds the upstreams' keys, each in a secret only
// its own execution role may read.

// GatewayNkeyEnv is the variable the gateway's bus nkey seed is injected in
// (its config's nkeyEnv).
const GatewayNkeyEnv = "FLOCK_GATEWAY_NKEY_SEED"

// EgressSubnetBase is the first of the gateway's subnets among the 16 of the
// VPC range (Subnet): one per zone, after the private ones (at most 6).
const EgressSubnetBase = 8

// GatewayHost is the gateway's DNS name in the namespace.
func GatewayHost(namespace string) string { return "gateway." + namespace }

// GatewayURL is the gateway as agents call it.
func GatewayURL(namespace string) string {
	return fmt.Sprintf("http://%s:%d", GatewayHost(namespace), protocol.GatewayPort)
}

// ProxyURL is the gateway as an agent's proxy variables name it: with the
// agent's token as the password, which stock tools send as
// Proxy-Authorization: Basic and the gateway knows the agent by.
func ProxyURL(namespace, token string) string {
	u := url.URL{Scheme: "http", User: url.UserPassword("agent", token), Host: fmt.Sprintf("%s:%d", GatewayHost(namespace), protocol.GatewayPort)}
	return u.String()
}

// ecsCredentialsHost is where a task's role credentials and metadata are
// served (169.254.170.2): never through the gateway, which refuses it.
const ecsCredentialsHost = "169.254.170.2"

// GatewayConfig renders the aws gateway's config: callers by token (only
// the tokens' hashes go in), each key in the variable its secret fills, its
// bus nkey in GatewayNkeyEnv, usage to the bus at the URL agents use, and
// the VPC's range (vpc) as the flock's own, which egress never dials.
func GatewayConfig(m flock.Model, namespace string, vpc netip.Prefix, tokens map[string]string) ([]byte, error) {
	return gatewayconfig.Render(m, gatewayconfig.Options{
		Callers: protocol.CallersByToken, Tokens: tokens, KeyEnv: gatewayconfig.KeyEnvVar,
		NATSURL: BusURL(m, namespace), NkeyEnv: GatewayNkeyEnv, Pool: []string{vpc.Masked().String()},
	})
}

// validateGateway: a flock with a gateway needs the VPC the stack creates
// (the gateway's route out is made in it) with egress "endpoints" (with
// "nat" every task would have a route around the gateway), and egress
// rules the DNS firewall can name that keep the VPC's own range closed.
func (c Config) validateGateway(n Network, m flock.Model, add func(key, format string, v ...any)) {
	if !m.Gateway.Enabled() {
		return
	}
	if c.VpcID != "" {
		add(Key+".vpcId", "must be unset with flock:gateway: the gateway's route out (a NAT gateway, its public subnet, and subnets and a route table of the gateway's own) is made in the VPC the stack creates; an existing VPC is not supported with a gateway yet")
	}
	if n.Egress == EgressNAT {
		add(Key+".egress", "must be %q with flock:gateway: with %q every task's subnets route to the NAT gateway and agents could reach the model APIs around the gateway; the gateway gets a NAT route of its own", EgressEndpoints, EgressNAT)
	}
	// The egress rules' hosts go into the VPC's DNS firewall, and no rule
	// may open the VPC itself to the gateway: the bus, EFS and the
	// endpoints are there.
	for _, r := range m.Gateway.EgressRules {
		if err := dnsfirewall.CheckDomain(r.Host); err != nil {
			add(flock.EgressKey, "rule for host %q: %v (the VPC's DNS firewall allows the egress rules' hosts by name)", r.Host, err)
		}
		for _, pr := range r.PrivateRanges {
			if p, err := netip.ParsePrefix(pr); err == nil && p.Overlaps(n.CIDR) {
				add(flock.EgressKey, "rule for host %q: privateRanges %s overlaps the VPC's range %s (%s.cidr): the bus, EFS and the AWS endpoints are there, and the gateway never dials them", r.Host, pr, n.CIDR, Key)
			}
		}
	}
	if _, err := SizeFor(m.Gateway.Limits); err != nil {
		add("flock:gateway.limits", "%v", err)
	}
	// The VPC's DNS firewall allows the gateway's hosts by name: each must
	// be a name a domain list can hold.
	const dnsWhy = "the VPC's DNS firewall allows the gateway's upstreams and span collector by their exact names"
	for _, up := range m.Gateway.Upstreams {
		if _, err := (dnsfirewall.Names{Hosts: []string{up.URL}}).HostNames(); err != nil {
			add("flock:gateway.upstreams."+up.Name+".url", "%v (%s)", err, dnsWhy)
		}
	}
	if m.OTLP.Endpoint != "" {
		if _, err := (dnsfirewall.Names{Hosts: []string{m.OTLP.Endpoint}}).HostNames(); err != nil {
			add("flock:otlp.endpoint", "%v (%s)", err, dnsWhy)
		}
	}
}

// checkGateway: with a gateway, everything it and the agents need is there.
func (a Args) checkGateway() error {
	if !a.Model.Gateway.Enabled() {
		return nil
	}
	if len(a.GatewayConfig) == 0 || a.GatewaySeed == "" {
		return fmt.Errorf("the gateway's config and bus credentials are required")
	}
	for _, up := range a.Model.Gateway.Upstreams {
		if a.GatewayKeys[up.Name] == "" {
			return fmt.Errorf("no key for upstream %s", up.Name)
		}
	}
	for _, name := range a.Model.Gateway.EgressSecrets() {
		if a.EgressSecrets[name] == "" {
			return fmt.Errorf("no value for the egress credential flock:%s", name)
		}
	}
	if a.Model.Gateway.Brokered() && (a.EgressCASeed == "" || a.EgressCA == "") {
		return fmt.Errorf("the egress CA (its seed and certificate) is required with brokered egress rules")
	}
	for _, ag := range a.Model.Agents {
		if a.GatewayTokens[ag.ID] == "" {
			return fmt.Errorf("agent %s: no gateway token", ag.ID)
		}
	}
	return nil
}

// gatewayEgress declares the gateway's route out: a NAT gateway (in its
// public subnet, in the first zone), a route table of the gateway's own
// whose default route is that NAT gateway, and one subnet per zone on it.
// Nothing but the gateway runs there.
func (d *declarer) gatewayEgress(vpc *ec2.Vpc, zones []string) error {
	n := d.args.Network
	nat, err := d.natGateway(vpc, zones[0])
	if err != nil {
		return err
	}
	rt, err := ec2.NewRouteTable(d.ctx, d.n("egress-rt"), &ec2.RouteTableArgs{VpcId: vpc.ID(), Tags: d.tags(protocol.RoleEgress, "")}, d.parent)
	if err != nil {
		return fmt.Errorf("egress route table: %w", err)
	}
	route, err := ec2.NewRoute(d.ctx, d.n("egress-default"), &ec2.RouteArgs{
		RouteTableId: rt.ID(), DestinationCidrBlock: pulumi.String("0.0.0.0/0"), NatGatewayId: nat.ID(),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("egress default route: %w", err)
	}
	d.gatewayRoute = route
	for i := 0; i < n.AZCount; i++ {
		cidr, err := Subnet(n.CIDR, EgressSubnetBase+i)
		if err != nil {
			return err
		}
		name := d.n("egress", strconv.Itoa(i+1))
		id, err := d.subnet(name, vpc, cidr, zones[i], rt, protocol.RoleEgress)
		if err != nil {
			return err
		}
		d.gatewaySubnets = append(d.gatewaySubnets, id)
	}
	// The S3 gateway endpoint serves the gateway's subnets too: it pulls its
	// image layers without the NAT, and reaches no other bucket.
	d.routeTables = append(d.routeTables, rt.ID())
	return nil
}

// gatewaySecurityGroup: the gateway admits 8080 from the agents' group
// only; it reaches the internet on 443 (its NAT route: the model APIs, and
// the AWS endpoints), and the bus on 4222. Agents reach it on 8080; the bus
// and the endpoints admit it.
func (d *declarer) gatewaySecurityGroup() error {
	sg, err := ec2.NewSecurityGroup(d.ctx, d.n("gateway", "sg"), &ec2.SecurityGroupArgs{
		VpcId:               d.vpcID,
		Description:         pulumi.String("AI Flock model gateway: 8080 from agents only; egress 443 to the model APIs through its NAT route, 4222 to the bus"),
		RevokeRulesOnDelete: pulumi.Bool(true),
		Tags:                d.tags(protocol.RoleGateway, ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("security group gateway: %w", err)
	}
	d.sg.gateway = sg
	rules := []rule{
		{"gateway-from-agents", sg, "ingress", protocol.GatewayPort, d.sg.agents, nil, "Model APIs from agents"},
		{"agents-to-gateway", d.sg.agents, "egress", protocol.GatewayPort, sg, nil, "Model APIs through the gateway"},
		{"gateway-to-internet", sg, "egress", portHTTPS, nil, []string{"0.0.0.0/0"}, "HTTPS to the model APIs through the NAT gateway: the one route out of the flock"},
		{"gateway-to-bus", sg, "egress", protocol.ClientPort, d.sg.bus, nil, "NATS to the bus (usage)"},
		{"bus-from-gateway", d.sg.bus, "ingress", protocol.ClientPort, sg, nil, "NATS from the gateway"},
	}
	if p := otlpPort(d.m.OTLP.Endpoint); p != 0 && p != portHTTPS {
		// Spans to the OTLP endpoint (flock:otlp.endpoint), on its port.
		rules = append(rules, rule{"gateway-to-otlp", sg, "egress", p, nil, []string{"0.0.0.0/0"}, "OTLP/HTTP spans to the collector (flock:otlp.endpoint) through the NAT gateway"})
	}
	// The egress rules' upstreams on their ports: 443 is open above;
	// another port (plain HTTP on 80, a registry on 8443) gets a rule of
	// its own, to anywhere, since the broker checks each address it dials.
	for _, p := range d.egressPorts() {
		rules = append(rules, rule{"gateway-to-egress-" + strconv.Itoa(p), sg, "egress", p, nil, []string{"0.0.0.0/0"},
			fmt.Sprintf("Upstreams of the egress rules on port %d (flock:gateway.egress) through the NAT gateway", p)})
	}
	if d.sg.endpoints != nil {
		rules = append(rules, rule{"endpoints-from-gateway", d.sg.endpoints, "ingress", portHTTPS, sg, nil, "HTTPS from gateway"})
	}
	return d.declareRules(rules)
}

// declareGateway: the gateway as a one-task service, hardened like the bus
// (read-only root, its own UID, no capabilities, init, a healthcheck, its
// own log group, /tmp and /run on task volumes), in its own subnets and
// group, registered in Cloud Map as gateway.<namespace>. Its secrets (each
// upstream's key, its bus seed, its config in parts) are its own: its
// execution role reads them and nothing else; its task role is granted
// nothing. A changed config or key rolls it (a Fargate task reads its
// secrets when it starts).
func (d *declarer) declareGateway() error {
	g := d.m.Gateway
	role := protocol.RoleGateway
	lg, err := d.logGroup("gateway", role, "", TaskLogGroupName(d.ctx.Stack(), d.name, "gateway"))
	if err != nil {
		return err
	}
	t := &task{
		key: "gateway", role: role, uid: g.UID, gid: g.UID, limits: g.Limits,
		image: d.gatewayImg.RepoDigest, logGroup: lg,
		env:     map[string]string{},
		ports:   []PortMapping{{ContainerPort: protocol.GatewayPort, HostPort: protocol.GatewayPort, Protocol: "tcp", Name: "gateway"}},
		health:  []string{"CMD", "/flock-gateway", "health"},
		subnets: d.gatewaySubnets,
	}
	material := []string{"ai-flock/gateway", string(d.args.GatewayConfig), d.args.GatewaySeed}
	add := func(name, env, desc string, value pulumi.StringInput) error {
		s, v, err := d.secret(name, role, "", desc, value)
		if err != nil {
			return err
		}
		t.secrets = append(t.secrets, secretRef{env: env, arn: s.Arn})
		t.deps = append(t.deps, v)
		return nil
	}
	for _, up := range g.Upstreams {
		key := d.args.GatewayKeys[up.Name]
		material = append(material, up.Name, key)
		if err := add("gateway-key-"+up.Name, gatewayconfig.KeyEnvVar(up.Name),
			fmt.Sprintf("AI Flock %s gateway: the key of upstream %s (%s)", d.name, up.Name, up.URL),
			pulumi.ToSecret(pulumi.String(key)).(pulumi.StringOutput)); err != nil {
			return err
		}
	}
	// The egress broker's: each rule's credential and its CA's seed, in
	// secrets of the gateway's own like the upstreams' keys.
	for _, name := range slices.Sorted(maps.Keys(d.args.EgressSecrets)) {
		v := d.args.EgressSecrets[name]
		material = append(material, "egress/"+name, v)
		if err := add("gateway-egress-"+name, gatewayconfig.EgressCredentialEnvVar(name),
			fmt.Sprintf("AI Flock %s gateway: the egress credential flock:%s", d.name, name),
			pulumi.ToSecret(pulumi.String(v)).(pulumi.StringOutput)); err != nil {
			return err
		}
	}
	if g.Brokered() {
		material = append(material, "egress-ca", d.args.EgressCASeed)
		if err := add("gateway-egress-ca", gatewayconfig.EgressCASeedEnvVar, "AI Flock "+d.name+": the seed of the gateway's egress CA",
			pulumi.ToSecret(pulumi.String(d.args.EgressCASeed)).(pulumi.StringOutput)); err != nil {
			return err
		}
	}
	if err := add("gateway-nkey", GatewayNkeyEnv, "AI Flock "+d.name+": the gateway's NATS nkey seed",
		pulumi.ToSecret(pulumi.String(d.args.GatewaySeed)).(pulumi.StringOutput)); err != nil {
		return err
	}
	// The egress rules in the plain environment too (no credential in
	// them; the gateway reads its config's): the policy pack flags blind
	// tunnels and extra roots from there.
	if rules, err := gatewayconfig.EgressRulesJSON(d.m); err != nil {
		return err
	} else if rules != "" {
		t.env[protocol.EnvGatewayEgressRules] = rules
	}
	parts, err := protocol.EncodeEnv(d.args.GatewayConfig)
	if err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	// The config holds no key (token hashes, budgets, upstream URLs), but
	// grows with the flock: in Secrets Manager, like the bus's, it never
	// bloats the task definition (64 KiB at most).
	t.env[protocol.EnvPartsVar(protocol.EnvGatewayConfigData)] = strconv.Itoa(len(parts))
	for i, p := range parts {
		if err := add(fmt.Sprintf("gateway-config-%d", i+1), protocol.EnvPartVar(protocol.EnvGatewayConfigData, i+1),
			fmt.Sprintf("AI Flock %s gateway: its config, part %d of %d (gzip+base64)", d.name, i+1, len(parts)),
			pulumi.String(p)); err != nil {
			return err
		}
	}
	registry, err := d.busDiscovery("gateway") // gateway.<namespace>, as a bus node's
	if err != nil {
		return err
	}
	td, err := d.define(t)
	if err != nil {
		return err
	}
	t.deps = append(t.deps, d.gatewayRoute)
	_, err = d.serve(t, td, d.sg.gateway.ID(), pulumi.StringMap{"config": pulumi.String(digest(material...))}, registry, []pulumi.Resource{d.bus}, false)
	return err
}

// agentGateway gives agent a's task what it needs to call the gateway: its
// token, from a secret of its own (never in the task definition), as
// FLOCK_GATEWAY_TOKEN and as the SDKs' key variables, the
// variables pointing the SDKs at gateway.<namespace>, and a trigger that
// rolls it when its token changes.
func (d *declarer) agentGateway(a flock.Agent, t *task, triggers pulumi.StringMap) error {
	token := d.args.GatewayTokens[a.ID]
	s, v, err := d.secret(a.ID+"-gateway-token", "agent", a.ID, "AI Flock "+d.name+": the model gateway token of agent "+a.ID,
		pulumi.ToSecret(pulumi.String(token)).(pulumi.StringOutput))
	if err != nil {
		return err
	}
	t.secrets = append(t.secrets, secretRef{env: protocol.EnvGatewayToken, arn: s.Arn})
	// The SDKs' own key variables carry the token too: a stock SDK sends
	// it (x-api-key or Authorization: Bearer), and the gateway knows the
	// agent by it.
	for _, k := range gatewayconfig.KeyVars(d.m) {
		t.secrets = append(t.secrets, secretRef{env: k, arn: s.Arn})
	}
	t.deps = append(t.deps, v)
	// The proxy variables name the gateway with the token in them
	// (http://agent:<token>@gateway.<namespace>:8080: stock tools send it
	// as Proxy-Authorization), so they are a secret of the agent's own too;
	// the namespace's names (the gateway, the bus) and the task's
	// credentials endpoint are reached directly.
	var proxy *secretsmanager.Secret
	for _, kv := range gatewayconfig.AgentEnv(d.m, a, GatewayURL(d.args.Namespace), []string{d.args.Namespace, ecsCredentialsHost}, d.args.EgressCA) {
		k, val, _ := strings.Cut(kv, "=")
		if !slices.Contains(protocol.ProxyVars, k) {
			t.env[k] = val
			continue
		}
		if proxy == nil {
			s, v, err := d.secret(a.ID+"-gateway-proxy", "agent", a.ID, "AI Flock "+d.name+": the egress proxy URL of agent "+a.ID+" (its gateway token in it)",
				pulumi.ToSecret(pulumi.String(ProxyURL(d.args.Namespace, token))).(pulumi.StringOutput))
			if err != nil {
				return err
			}
			proxy = s
			t.deps = append(t.deps, v)
		}
		t.secrets = append(t.secrets, secretRef{env: k, arn: proxy.Arn})
	}
	triggers["gatewayToken"] = pulumi.String(digest("ai-flock/gateway-token", token))
	return nil
}

// otlpPort is the TCP port of an OTLP endpoint (0: none).
func otlpPort(endpoint string) int {
	if endpoint == "" {
		return 0
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if u.Scheme == "http" {
		return 80
	}
	return portHTTPS
}

// egressPorts are the egress rules' ports other than 443 and the span
// collector's (open already), sorted, each once.
func (d *declarer) egressPorts() []int {
	var out []int
	for _, r := range d.m.Gateway.EgressRules {
		if r.Port != portHTTPS && r.Port != otlpPort(d.m.OTLP.Endpoint) && !slices.Contains(out, r.Port) {
			out = append(out, r.Port)
		}
	}
	slices.Sort(out)
	return out
}
