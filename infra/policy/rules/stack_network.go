package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

func stackAgentOwnNetwork(rs []Resource) []Finding {
	var out []Finding
	// docker: each agent joins exactly one network, its own, and no other container joins it.
	nets := map[string]Resource{}
	for _, n := range byTypeSorted(rs, TypeNetwork) {
		if name := str(n.get("name")); name != "" {
			nets[name] = n
		}
	}
	ids, agents := agentContainers(rs)
	owner := map[string]string{} // network name -> agent
	for _, id := range ids {
		c := agents[id]
		fix := fmt.Sprintf("attach agent %s to exactly one network, its own internal <flock>-%s-net labelled ai-flock.agent=%s, and attach no other container to it (the bus joins through its bus-link step)", id, id, id)
		attached := c.get("networksAdvanced")
		if isUnknown(attached) {
			continue
		}
		if n := len(list(attached)); n != 1 {
			out = append(out, c.finding(fix, "agent %s joins %d networks; an agent joins exactly its own", id, n))
			continue
		}
		nameV := get(list(attached)[0], "name")
		if isUnknown(nameV) {
			continue
		}
		name := str(nameV)
		n, ok := nets[name]
		if !ok {
			out = append(out, c.finding(fix, "agent %s joins the network %q, which this stack does not declare as its own", id, name))
			continue
		}
		if l := dockerLabels(n); l[protocol.LabelRole] != protocol.RoleAgent || l[protocol.LabelAgent] != id {
			out = append(out, c.finding(fix, "agent %s joins the network %q, which is labelled for %s %q, not for it", id, name, describe(l[protocol.LabelRole]), l[protocol.LabelAgent]))
			continue
		}
		owner[name] = id
	}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		self := dockerLabels(c)[protocol.LabelAgent]
		for _, a := range list(c.get("networksAdvanced")) {
			name := get(a, "name")
			if isUnknown(name) {
				continue
			}
			if o, ok := owner[str(name)]; ok && (self != o || c.Name != agents[o].Name) {
				out = append(out, c.finding(fmt.Sprintf("detach it from %q: only agent %s (and the bus, through its bus-link step) may be on that network", str(name), o),
					"joins agent %s's network %q, so it can reach that agent directly", o, str(name)))
			}
		}
	}

	// aws: the security groups of agent services admit no ingress at all, so
	// no agent can reach another even when they share a group.
	agentTDs := agentTaskDefinitions(rs)
	sgByID := map[string]Resource{}
	agentSG := map[string]Resource{} // by resource name
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		if id := resourceID(sg); id != "" {
			sgByID[id] = sg
		}
		if t := awsTags(sg); t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" {
			agentSG[sg.Name] = sg
		}
	}
	for _, svc := range byTypeSorted(rs, awsrules.TypeService) {
		t := awsTags(svc)
		if !(t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" || agentTDs[str(svc.get("taskDefinition"))]) {
			continue
		}
		groups := svc.get("networkConfiguration", "securityGroups")
		if isUnknown(groups) {
			continue
		}
		if len(list(groups)) == 0 {
			out = append(out, svc.finding("give agent services a security group with no ingress, egress only to the bus (4222), EFS (2049) and the AWS endpoints",
				"runs agent tasks without a security group of their own, so the VPC's default group (which admits itself) applies"))
			continue
		}
		for _, g := range list(groups) {
			if sg, ok := sgByID[str(g)]; ok {
				agentSG[sg.Name] = sg
			}
		}
	}
	return append(out, groupsNoIngress(rs, agentSG,
		"give agents' security groups no ingress at all (egress only to the bus, EFS and the AWS endpoints); the bus and EFS groups admit the agents' group instead",
		"is an agents' security group with %d ingress rules: agents could reach each other",
		"adds ingress to the agents' security group %q: agents could be reached")...)
}

// groupsNoIngress finds the ingress of security groups (by resource name)
// that must admit nothing: their inline rules (inline says how many, %d)
// and the rules of their own that add some (byRule names the group, %q).
func groupsNoIngress(rs []Resource, groups map[string]Resource, fix, inline, byRule string) []Finding {
	var out []Finding
	ids := map[string]string{} // group ID -> resource name
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		sg := groups[name]
		if id := resourceID(sg); id != "" {
			ids[id] = name
		}
		if in := sg.get("ingress"); !isUnknown(in) && len(list(in)) > 0 {
			out = append(out, sg.finding(fix, inline, len(list(in))))
		}
	}
	for _, rule := range append(byTypeSorted(rs, awsrules.TypeSGIngressRule), byTypeSorted(rs, awsrules.TypeSecurityGroupRule)...) {
		if rule.Type == awsrules.TypeSecurityGroupRule && str(rule.get("type")) != "ingress" {
			continue
		}
		if name, ok := ids[str(rule.get("securityGroupId"))]; ok {
			out = append(out, rule.finding(fix, byRule, name))
		}
	}
	return out
}

// stackBusRoutesSelfOnly: on aws the nodes of a clustered bus talk on the
// route port (protocol.RoutePort): whoever reaches it can join the cluster
// as a node and read or rewrite every stream. The bus's security group
// (tagged ai-flock.role=bus, or the group of a bus service) may admit that
// port from itself only: never from agents, the operator or an address range.
func stackBusRoutesSelfOnly(rs []Resource) []Finding {
	fix := fmt.Sprintf("admit the route port %d on the bus's security group from that group itself only (a rule whose source is the bus group, or self: true); agents and the operator reach the bus on %d", protocol.RoutePort, protocol.ClientPort)
	names := map[string]string{} // security group ID -> resource name
	busSG := map[string]bool{}
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		id := resourceID(sg)
		if id == "" {
			continue
		}
		names[id] = sg.Name
		if awsTags(sg)[protocol.LabelRole] == protocol.RoleBus {
			busSG[id] = true
		}
	}
	for _, svc := range byTypeSorted(rs, awsrules.TypeService) {
		if awsTags(svc)[protocol.LabelRole] != protocol.RoleBus {
			continue
		}
		for _, g := range strs(svc.get("networkConfiguration", "securityGroups")) {
			busSG[g] = true
		}
	}
	group := func(id string) string {
		if n, ok := names[id]; ok {
			return fmt.Sprintf("the security group %q", n)
		}
		return "the security group " + id
	}
	// others lists what an ingress rule of group own admits besides own itself.
	others := func(own string, self bool, groups []string, ranges ...any) []string {
		var out []string
		for _, g := range groups {
			if g != own {
				out = append(out, group(g))
			}
		}
		for _, r := range ranges {
			for _, c := range append(strs(r), str(r)) {
				if c != "" {
					out = append(out, c)
				}
			}
		}
		if !self && len(groups) == 0 && len(out) == 0 {
			out = append(out, "an unnamed peer")
		}
		return out
	}
	var out []Finding
	report := func(r Resource, own string, peers []string) {
		if len(peers) > 0 {
			out = append(out, r.finding(fix, "admits the NATS route port %d of the bus's group %s from %s: only the bus nodes may join the cluster",
				protocol.RoutePort, names[own], strings.Join(peers, ", ")))
		}
	}
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		own := resourceID(sg)
		if !busSG[own] {
			continue
		}
		for _, in := range list(sg.get("ingress")) {
			m := obj(in)
			if coversPort(m["protocol"], m["fromPort"], m["toPort"], protocol.RoutePort) {
				report(sg, own, others(own, truthy(m["self"]), strs(m["securityGroups"]), m["cidrBlocks"], m["ipv6CidrBlocks"], m["prefixListIds"]))
			}
		}
	}
	for _, r := range byTypeSorted(rs, awsrules.TypeSecurityGroupRule) {
		own := str(r.get("securityGroupId"))
		if str(r.get("type")) != "ingress" || !busSG[own] || !coversPort(r.get("protocol"), r.get("fromPort"), r.get("toPort"), protocol.RoutePort) {
			continue
		}
		var groups []string
		if src := r.get("sourceSecurityGroupId"); !isUnknown(src) && str(src) != "" {
			groups = []string{str(src)}
		}
		report(r, own, others(own, truthy(r.get("self")), groups, r.get("cidrBlocks"), r.get("ipv6CidrBlocks"), r.get("prefixListIds")))
	}
	for _, r := range byTypeSorted(rs, awsrules.TypeSGIngressRule) {
		own := str(r.get("securityGroupId"))
		if !busSG[own] || !coversPort(r.get("ipProtocol"), r.get("fromPort"), r.get("toPort"), protocol.RoutePort) {
			continue
		}
		var groups []string
		if ref := r.get("referencedSecurityGroupId"); !isUnknown(ref) && str(ref) != "" {
			groups = []string{str(ref)}
		}
		report(r, own, others(own, false, groups, r.get("cidrIpv4"), r.get("cidrIpv6"), r.get("prefixListId")))
	}
	return out
}
