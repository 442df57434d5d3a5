package rules

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

// The model gateway on aws (infra/awsflock/README.md, "The model gateway"):
// the gateway is the flock's one way out and the only holder of the model
// APIs' keys. These rules keep agents without a route of their own and
// without a key.

// infra/awsflock names an upstream's key secret <flock>-gateway-key-<upstream>.
const gatewayKeySecretName = "gateway-key-"

// hasAWSGateway reports whether the stack runs a model gateway on ECS: a
// service or task definition tagged ai-flock.role=gateway.
func hasAWSGateway(rs []Resource) bool {
	for _, r := range rs {
		if (r.Type == awsrules.TypeService || r.Type == awsrules.TypeTaskDefinition) && awsTags(r)[protocol.LabelRole] == protocol.RoleGateway {
			return true
		}
	}
	return false
}

// idsOf lists the identifiers the stack may refer to r by: its id and arn.
func idsOf(r Resource) []string {
	var out []string
	for _, k := range []string{"id", "arn"} {
		if v := str(r.get(k)); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// agentServices are the ECS services that run agents (tagged as an agent's,
// or running an agent's task definition), and agentGroups the security
// groups agents run in (tagged as the agents', or given to an agent
// service), by ID.
func agentServices(rs []Resource) (services []Resource, groups map[string]Resource) {
	agentTDs := agentTaskDefinitions(rs)
	byID := map[string]Resource{}
	groups = map[string]Resource{}
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		id := resourceID(sg)
		if id == "" {
			continue
		}
		byID[id] = sg
		if t := awsTags(sg); t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" {
			groups[id] = sg
		}
	}
	for _, svc := range byTypeSorted(rs, awsrules.TypeService) {
		t := awsTags(svc)
		if !(t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" || agentTDs[str(svc.get("taskDefinition"))]) {
			continue
		}
		services = append(services, svc)
		for _, g := range strs(svc.get("networkConfiguration", "securityGroups")) {
			if sg, ok := byID[g]; ok {
				groups[g] = sg
			}
		}
	}
	return services, groups
}

// stackAWSAgentsNoRouteOut: with a model gateway on aws, no agent has a route
// of its own out of the VPC: the route tables of the subnets agent services
// run in send nothing to an internet, egress-only or NAT gateway, and the
// agents' security groups have no egress to 0.0.0.0/0 or ::/0. (A public IP
// is ecs-service-no-public-ip's; without an internet route it reaches
// nothing.) Stacks without a gateway are not checked: there, flock:aws.egress
// "nat" gives every task a NAT route on purpose.
func stackAWSAgentsNoRouteOut(rs []Resource) []Finding {
	if !hasAWSGateway(rs) {
		return nil
	}
	const fix = "run agents only in subnets whose route table has no route to an internet or NAT gateway (the gateway has subnets of its own), and give the agents' security group egress to the flock's groups and the VPC endpoints only: agents reach the model APIs through the gateway (FLOCK_GATEWAY_URL)"
	names := map[string]string{} // resource ID -> name, for messages
	igws := map[string]bool{}
	for _, r := range rs {
		for _, id := range idsOf(r) {
			names[id] = r.Name
			if r.Type == awsrules.TypeInternetGateway {
				igws[id] = true
			}
		}
	}
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return fmt.Sprintf("%q", n)
		}
		return id
	}
	// target is where a route leads out of the VPC ("" when it does not).
	target := func(route any) string {
		if nat := str(get(route, "natGatewayId")); nat != "" {
			return "the NAT gateway " + name(nat)
		}
		if eo := str(get(route, "egressOnlyGatewayId")); eo != "" {
			return "the egress-only internet gateway " + name(eo)
		}
		if gw := str(get(route, "gatewayId")); gw != "" && (igws[gw] || strings.HasPrefix(gw, "igw-")) {
			return "the internet gateway " + name(gw)
		}
		return ""
	}
	dest := func(route any) string {
		for _, k := range []string{"destinationCidrBlock", "cidrBlock", "destinationIpv6CidrBlock", "ipv6CidrBlock"} {
			if d := str(get(route, k)); d != "" {
				return d
			}
		}
		return "traffic"
	}
	out := map[string]string{} // route table ID -> the route out it has
	for _, rt := range byTypeSorted(rs, awsrules.TypeRouteTable) {
		for _, r := range list(rt.get("routes")) {
			if to := target(r); to != "" {
				for _, id := range idsOf(rt) {
					out[id] = dest(r) + " to " + to
				}
			}
		}
	}
	for _, r := range byTypeSorted(rs, awsrules.TypeRoute) {
		if to := target(r.Props); to != "" && str(r.get("routeTableId")) != "" {
			out[str(r.get("routeTableId"))] = dest(r.Props) + " to " + to
		}
	}
	tableOf := map[string]string{} // subnet ID -> route table ID
	for _, a := range byTypeSorted(rs, awsrules.TypeRouteTableAssociation) {
		if sub, rt := str(a.get("subnetId")), str(a.get("routeTableId")); sub != "" && rt != "" {
			tableOf[sub] = rt
		}
	}

	var findings []Finding
	services, groups := agentServices(rs)
	for _, svc := range services {
		for _, sub := range strs(svc.get("networkConfiguration", "subnets")) {
			rt, ok := tableOf[sub]
			if !ok {
				continue
			}
			if to, ok := out[rt]; ok {
				findings = append(findings, svc.finding(fix, "runs agent tasks in the subnet %s, whose route table %s routes %s: agents could reach the internet around the gateway", name(sub), name(rt), to))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(groups)) {
		sg := groups[id]
		for _, e := range list(sg.get("egress")) {
			m := obj(e)
			for _, c := range worldCIDRs(m["cidrBlocks"], m["ipv6CidrBlocks"]) {
				findings = append(findings, sg.finding(fix, "is an agents' security group with egress (ports %s-%s) to %s: agents could reach the internet around the gateway", describe(m["fromPort"]), describe(m["toPort"]), c))
			}
		}
	}
	for _, r := range byTypeSorted(rs, awsrules.TypeSecurityGroupRule) {
		sg, ok := groups[str(r.get("securityGroupId"))]
		if !ok || str(r.get("type")) != "egress" {
			continue
		}
		for _, c := range worldCIDRs(r.get("cidrBlocks"), r.get("ipv6CidrBlocks")) {
			findings = append(findings, r.finding(fix, "gives the agents' security group %q egress (ports %s-%s) to %s: agents could reach the internet around the gateway", sg.Name, describe(r.get("fromPort")), describe(r.get("toPort")), c))
		}
	}
	for _, r := range byTypeSorted(rs, awsrules.TypeSGEgressRule) {
		sg, ok := groups[str(r.get("securityGroupId"))]
		if !ok {
			continue
		}
		for _, c := range worldCIDRs(r.get("cidrIpv4"), r.get("cidrIpv6")) {
			findings = append(findings, r.finding(fix, "gives the agents' security group %q egress (ports %s-%s) to %s: agents could reach the internet around the gateway", sg.Name, describe(r.get("fromPort")), describe(r.get("toPort")), c))
		}
	}
	return findings
}

var (
	// apiKeyVar is a variable named like a credential of a model API.
	apiKeyVar = regexp.MustCompile(`(?i)(_API_KEY$|_SECRET|PASSWORD)`)
	// providerKey is a value that looks like a model provider's key
	// (Anthropic's sk-ant-…, OpenAI's sk-…).
	providerKey = regexp.MustCompile(`sk-ant-|(?:^|[^A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}`)
)

// ecsTaskNoGatewayKeyInAgent: the model APIs' keys stay with the gateway. No
// agent task definition reads a secret of the gateway (tagged
// ai-flock.role=gateway, or named <flock>-gateway-key-<upstream>: an
// upstream's key, the gateway's bus seed, its config), and no agent holds in
// its plain environment a variable named like an API key (*_API_KEY,
// *_SECRET*, *PASSWORD*) or a value that looks like a provider's key
// (sk-ant-…, sk-…). Agents get the gateway's URL and a token of their own.
func ecsTaskNoGatewayKeyInAgent(rs []Resource) []Finding {
	const fix = "give agents no model API key: they call the model APIs through the gateway (FLOCK_GATEWAY_URL, ANTHROPIC_BASE_URL, OPENAI_BASE_URL) with their own gateway token (FLOCK_GATEWAY_TOKEN, from a secret of their own); the upstreams' keys stay in the gateway's secrets, read by its execution role only"
	gateway := map[string]string{} // secret ID or ARN -> its name
	for _, s := range byTypeSorted(rs, awsrules.TypeSecret) {
		t := awsTags(s)
		if t[protocol.LabelRole] != protocol.RoleGateway && !(strings.Contains(s.Name, gatewayKeySecretName) && t[protocol.LabelAgent] == "") {
			continue
		}
		for _, id := range idsOf(s) {
			gateway[id] = s.Name
		}
	}
	// reads reports the gateway secret a valueFrom names: its ARN, or its ARN
	// followed by a JSON key, version stage or version ID.
	reads := func(valueFrom string) (string, bool) {
		for id, n := range gateway {
			if valueFrom == id || strings.HasPrefix(valueFrom, id+":") {
				return n, true
			}
		}
		return "", false
	}
	var out []Finding
	for _, td := range byTypeSorted(rs, awsrules.TypeTaskDefinition) {
		id := taskAgent(td)
		if id == "" {
			continue
		}
		defs, _, _ := containerDefs(td) // unknown or unreadable: the task definition rules say so
		for _, c := range defs {
			name := str(c["name"])
			for _, s := range list(c["secrets"]) {
				m := obj(s)
				if n, ok := reads(str(m["valueFrom"])); ok {
					out = append(out, td.finding(fix, "agent %s's container %q reads the gateway's secret %q as %s: the gateway's keys and credentials must never reach an agent", id, name, n, str(m["name"])))
				}
			}
			for _, e := range list(c["environment"]) {
				m := obj(e)
				k, v := str(m["name"]), str(m["value"])
				switch { // never echo the value
				case apiKeyVar.MatchString(k):
					out = append(out, td.finding(fix, "agent %s's container %q has the variable %s, named like an API key, secret or password, in its environment", id, name, k))
				case providerKey.MatchString(v):
					out = append(out, td.finding(fix, "agent %s's container %q has what looks like a model provider's key in its environment (variable %s)", id, name, k))
				}
			}
		}
	}
	return out
}
