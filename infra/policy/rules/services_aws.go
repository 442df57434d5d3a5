package rules

import (
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

// stackAWSServicesNoIngress: on aws the flock's services (role services)
// hold the board's bus user and listen on nothing: their security group
// (tagged ai-flock.role=services, or the group of a services service)
// admits nothing at all, inline or by a rule of its own, and a services
// service runs in a group of its own (no group means the VPC's default
// one, which admits itself). Their egress, the bus and the AWS endpoints,
// is what they need; the bus admits them on 4222.
func stackAWSServicesNoIngress(rs []Resource) []Finding {
	const fix = "give the services' security group no ingress at all (they listen on nothing); the bus's group admits theirs on 4222 instead, as infra/awsflock does"
	var out []Finding
	byID := map[string]Resource{}
	groups := map[string]Resource{} // by resource name
	for _, sg := range byTypeSorted(rs, awsrules.TypeSecurityGroup) {
		if id := resourceID(sg); id != "" {
			byID[id] = sg
		}
		if awsTags(sg)[protocol.LabelRole] == protocol.RoleServices {
			groups[sg.Name] = sg
		}
	}
	services := map[string]bool{} // the services' task definitions, by arn, id and family
	for _, td := range byTypeSorted(rs, awsrules.TypeTaskDefinition) {
		if awsTags(td)[protocol.LabelRole] == protocol.RoleServices {
			for _, k := range []string{"arn", "id", "family"} {
				if v := str(td.get(k)); v != "" {
					services[v] = true
				}
			}
		}
	}
	for _, svc := range byTypeSorted(rs, awsrules.TypeService) {
		if awsTags(svc)[protocol.LabelRole] != protocol.RoleServices && !services[str(svc.get("taskDefinition"))] {
			continue
		}
		gs := svc.get("networkConfiguration", "securityGroups")
		if isUnknown(gs) {
			continue
		}
		if len(list(gs)) == 0 {
			out = append(out, svc.finding(fix, "runs the flock's services without a security group of their own, so the VPC's default group (which admits itself) applies"))
			continue
		}
		for _, g := range list(gs) {
			if sg, ok := byID[str(g)]; ok {
				groups[sg.Name] = sg
			}
		}
	}
	return append(out, groupsNoIngress(rs, groups, fix,
		"is the flock services' security group with %d ingress rules: something could reach the board's bus user's process",
		"adds ingress to the flock services' security group %q: they listen on nothing, and nothing may reach them")...)
}
