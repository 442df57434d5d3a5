// Reading the model from a capture of the aws stack: each input it knows,
// and a failure naming any it does not.

package fargate

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// known are the inputs the replay maps, per resource type it reads; any
// other input of these types fails Read loudly.
var known = map[string][]string{
	awsrules.TypeTaskDefinition: {"family", "requiresCompatibilities", "networkMode", "cpu", "memory", "runtimePlatform",
		"executionRoleArn", "taskRoleArn", "containerDefinitions", "volumes", "tags", "ephemeralStorage"},
	awsrules.TypeService: {"name", "cluster", "taskDefinition", "desiredCount", "launchType", "platformVersion",
		"networkConfiguration", "deploymentCircuitBreaker", "deploymentMinimumHealthyPercent", "deploymentMaximumPercent",
		"enableExecuteCommand", "enableEcsManagedTags", "propagateTags", "triggers", "forceNewDeployment", "tags",
		"serviceRegistries", "waitForSteadyState"},
	awsrules.TypeSecurityGroupRule: {"type", "securityGroupId", "protocol", "fromPort", "toPort", "sourceSecurityGroupId",
		"cidrBlocks", "prefixListIds", "description", "self"},
	awsrules.TypeSecurityGroup:    {"vpcId", "description", "revokeRulesOnDelete", "tags", "name", "namePrefix"},
	awsrules.TypeAccessPoint:      {"fileSystemId", "rootDirectory", "posixUser", "tags"},
	awsrules.TypeSecretVersion:    {"secretId", "secretString"},
	awsrules.TypeDiscoveryService: {"name", "dnsConfig", "healthCheckCustomConfig", "forceDestroy", "tags", "description"},
}

// Read reads a capture of the aws stack.
func Read(s *capture.Stack) (*Model, error) {
	m := &Model{
		TaskDefs: map[string]*TaskDef{}, Secrets: map[string]string{}, AccessPoints: map[string]AccessPoint{},
		Groups: map[string]*Group{}, Subnets: map[string]*Subnet{}, Discovery: map[string]string{}, Images: map[string]capture.Resource{}, EFSGroups: map[string][]string{},
	}
	var problems []string
	for _, r := range s.Resources {
		if keys, ok := known[r.Type]; ok {
			for k := range r.Inputs {
				if !slices.Contains(keys, string(k)) {
					problems = append(problems, fmt.Sprintf("%s %s: input %q is not mapped by the Fargate replay", r.Type, r.Name, k))
				}
			}
		}
	}
	secretByID := map[string]string{} // secret ID -> ARN
	namespaces := map[string]string{} // namespace ID -> name
	routeTables := map[string]bool{}  // route table ID -> has a default route out
	assoc := map[string]string{}      // subnet ID -> route table ID
	for _, r := range s.Resources {
		in := replay.Inputs(r)
		switch r.Type {
		case awsrules.TypeSecret:
			secretByID[capture.MockID(r.Name)] = r.MockARN()
		case awsrules.TypeNamespace:
			namespaces[capture.MockID(r.Name)] = replay.Str(in["name"])
		case awsrules.TypeSecurityGroup:
			m.Groups[capture.MockID(r.Name)] = &Group{ID: capture.MockID(r.Name), Name: r.Name}
		case awsrules.TypeRoute:
			if replay.Str(in["destinationCidrBlock"]) == "0.0.0.0/0" && (replay.Str(in["natGatewayId"]) != "" || replay.Str(in["gatewayId"]) != "") {
				routeTables[replay.Str(in["routeTableId"])] = true
			}
		case awsrules.TypeRouteTableAssociation:
			assoc[replay.Str(in["subnetId"])] = replay.Str(in["routeTableId"])
		case awsrules.TypeSubnet:
			p, err := netip.ParsePrefix(replay.Str(in["cidrBlock"]))
			if err != nil {
				problems = append(problems, fmt.Sprintf("subnet %s: %v", r.Name, err))
				continue
			}
			m.Subnets[capture.MockID(r.Name)] = &Subnet{ID: capture.MockID(r.Name), Name: r.Name, CIDR: p}
		case awsrules.TypeVpcEndpoint:
			if replay.Str(in["vpcEndpointType"]) == "Gateway" {
				m.PrefixLists = append(m.PrefixLists, capture.MockPrefixS3)
			} else {
				m.EndpointGroups = append(m.EndpointGroups, replay.Strs(in["securityGroupIds"])...)
			}
		case awsrules.TypeMountTarget:
			fs := replay.Str(in["fileSystemId"])
			m.EFSGroups[fs] = append(m.EFSGroups[fs], replay.Strs(in["securityGroups"])...)
		case capture.TypeImage:
			// A task definition names a pushed image by <repository>@<digest>
			// (the mocks' repoDigest); a local one by its ID.
			name := replay.Str(in["imageName"])
			if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
				name = name[:i]
			}
			m.Images[name+"@"+capture.MockDigest(r.Name)] = r
			m.Images[capture.MockDigest(r.Name)] = r
		}
	}
	for id, rt := range assoc {
		if sn := m.Subnets[id]; sn != nil {
			sn.RouteTable, sn.RouteOut = rt, routeTables[rt]
		}
	}
	for _, r := range s.Resources {
		in := replay.Inputs(r)
		var err error
		switch r.Type {
		case awsrules.TypeSecretVersion:
			arn, ok := secretByID[replay.Str(in["secretId"])]
			if !ok {
				err = fmt.Errorf("secret %q is not declared", replay.Str(in["secretId"]))
				break
			}
			m.Secrets[arn] = replay.Str(in["secretString"])
		case awsrules.TypeAccessPoint:
			var ap AccessPoint
			ap, err = readAccessPoint(r, in)
			m.AccessPoints[ap.ID] = ap
		case awsrules.TypeSecurityGroupRule:
			err = m.readRule(in)
		case awsrules.TypeDiscoveryService:
			dns, _ := in["dnsConfig"].(map[string]any)
			ns, ok := namespaces[replay.Str(dns["namespaceId"])]
			if !ok {
				err = fmt.Errorf("namespace %q is not declared", replay.Str(dns["namespaceId"]))
				break
			}
			m.Discovery[r.MockARN()] = replay.Str(in["name"]) + "." + ns
		case awsrules.TypeTaskDefinition:
			var td *TaskDef
			if td, err = readTaskDef(r, in); err == nil {
				m.TaskDefs[td.ARN] = td
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: %v", r.Type, r.Name, err))
		}
	}
	byURN := map[string]string{} // a service's URN suffix (logical name) -> logical name
	for _, r := range s.Resources {
		if r.Type == awsrules.TypeService {
			byURN[r.Name] = r.Name
		}
	}
	for _, r := range s.Resources {
		if r.Type != awsrules.TypeService {
			continue
		}
		svc, err := m.readService(r, replay.Inputs(r), byURN)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: %v", r.Type, r.Name, err))
			continue
		}
		m.Services = append(m.Services, svc)
	}
	for _, td := range m.TaskDefs {
		for _, c := range td.Containers {
			if _, ok := m.Images[c.Image]; !ok {
				problems = append(problems, fmt.Sprintf("task definition %s: container %s runs image %q, which no image of the stack builds (the replay builds each locally: an unmapped one cannot run)", td.Family, c.Name, c.Image))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("fargate replay: %s", strings.Join(problems, "; "))
	}
	return m, nil
}

func readAccessPoint(r capture.Resource, in map[string]any) (AccessPoint, error) {
	ap := AccessPoint{ID: capture.MockID(r.Name), Name: r.Name, FileSystemID: replay.Str(in["fileSystemId"])}
	root, _ := in["rootDirectory"].(map[string]any)
	ap.Path = replay.Str(root["path"])
	if ap.Path == "" {
		ap.Path = "/"
	}
	if ci, ok := root["creationInfo"].(map[string]any); ok {
		ap.HasCreationInfo = true
		ap.OwnerUID, ap.OwnerGID, ap.Perms = num(ci["ownerUid"]), num(ci["ownerGid"]), replay.Str(ci["permissions"])
		if _, err := strconv.ParseUint(ap.Perms, 8, 32); err != nil {
			return ap, fmt.Errorf("creationInfo.permissions %q is not octal", ap.Perms)
		}
	}
	pu, ok := in["posixUser"].(map[string]any)
	if !ok {
		return ap, fmt.Errorf("no posixUser: the replay runs access points that make every request as one identity")
	}
	ap.UID, ap.GID = num(pu["uid"]), num(pu["gid"])
	return ap, nil
}

func (m *Model) readRule(in map[string]any) error {
	g := m.Groups[replay.Str(in["securityGroupId"])]
	if g == nil {
		return fmt.Errorf("security group %q is not declared", replay.Str(in["securityGroupId"]))
	}
	r := Rule{Protocol: replay.Str(in["protocol"]), FromPort: num(in["fromPort"]), ToPort: num(in["toPort"]),
		Peer: replay.Str(in["sourceSecurityGroupId"]), PrefixLists: replay.Strs(in["prefixListIds"]), Description: replay.Str(in["description"])}
	if in["self"] == true {
		r.Peer = g.ID
	}
	for _, c := range replay.Strs(in["cidrBlocks"]) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("cidr %q: %v", c, err)
		}
		r.CIDRs = append(r.CIDRs, p)
	}
	switch replay.Str(in["type"]) {
	case "ingress":
		g.Ingress = append(g.Ingress, r)
	case "egress":
		g.Egress = append(g.Egress, r)
	default:
		return fmt.Errorf("rule type %q", replay.Str(in["type"]))
	}
	return nil
}

func readTaskDef(r capture.Resource, in map[string]any) (*TaskDef, error) {
	td := &TaskDef{ARN: r.MockARN(), Family: replay.Str(in["family"]), Volumes: map[string]Volume{}}
	if !slices.Contains(replay.Strs(in["requiresCompatibilities"]), "FARGATE") {
		return nil, fmt.Errorf("requiresCompatibilities %v: the replay runs FARGATE task definitions", in["requiresCompatibilities"])
	}
	if mode := replay.Str(in["networkMode"]); mode != "awsvpc" {
		return nil, fmt.Errorf("networkMode %q: Fargate runs awsvpc only", mode)
	}
	var err error
	if td.CPU, err = strconv.Atoi(replay.Str(in["cpu"])); err != nil {
		return nil, fmt.Errorf("cpu %q: Fargate needs the task's CPU units", replay.Str(in["cpu"]))
	}
	if td.MemoryMiB, err = strconv.Atoi(replay.Str(in["memory"])); err != nil {
		return nil, fmt.Errorf("memory %q: Fargate needs the task's memory", replay.Str(in["memory"]))
	}
	rp, _ := in["runtimePlatform"].(map[string]any)
	td.Arch = replay.Str(rp["cpuArchitecture"])
	if td.Arch == "" {
		td.Arch = "X86_64"
	}
	if es, ok := in["ephemeralStorage"].(map[string]any); ok {
		td.EphemeralGiB = num(es["sizeInGib"])
	}
	dec := json.NewDecoder(strings.NewReader(replay.Str(in["containerDefinitions"])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&td.Containers); err != nil {
		return nil, fmt.Errorf("containerDefinitions: %v (a field the replay does not map is refused)", err)
	}
	for _, v := range replay.List(in["volumes"]) {
		vm, _ := v.(map[string]any)
		vol := Volume{Name: replay.Str(vm["name"])}
		for k := range vm {
			if k != "name" && k != "efsVolumeConfiguration" {
				return nil, fmt.Errorf("volume %s: %q is not mapped by the Fargate replay", vol.Name, k)
			}
		}
		if efs, ok := vm["efsVolumeConfiguration"].(map[string]any); ok {
			auth, _ := efs["authorizationConfig"].(map[string]any)
			vol.EFS = &EFSVolume{FileSystemID: replay.Str(efs["fileSystemId"]), TransitEncryption: replay.Str(efs["transitEncryption"]),
				RootDirectory: replay.Str(efs["rootDirectory"]), AccessPointID: replay.Str(auth["accessPointId"]), IAM: replay.Str(auth["iam"])}
		}
		td.Volumes[vol.Name] = vol
	}
	return td, td.check()
}

func (m *Model) readService(r capture.Resource, in map[string]any, services map[string]string) (*Service, error) {
	svc := &Service{Name: replay.Str(in["name"]), Resource: r.Name, TaskDef: replay.Str(in["taskDefinition"]), Desired: num(in["desiredCount"]),
		WaitSteady: in["waitForSteadyState"] == true}
	if svc.Name == "" {
		svc.Name = r.Name
	}
	if lt := replay.Str(in["launchType"]); lt != "FARGATE" {
		return nil, fmt.Errorf("launchType %q: the replay runs FARGATE services", lt)
	}
	if _, ok := m.TaskDefs[svc.TaskDef]; !ok {
		return nil, fmt.Errorf("task definition %q is not declared", svc.TaskDef)
	}
	nc, _ := in["networkConfiguration"].(map[string]any)
	svc.Groups, svc.Subnets, svc.PublicIP = replay.Strs(nc["securityGroups"]), replay.Strs(nc["subnets"]), nc["assignPublicIp"] == true
	if len(svc.Groups) == 0 {
		return nil, fmt.Errorf("no security groups")
	}
	for _, g := range svc.Groups {
		if m.Groups[g] == nil {
			return nil, fmt.Errorf("security group %q is not declared", g)
		}
	}
	if sr, ok := in["serviceRegistries"].(map[string]any); ok {
		name, ok := m.Discovery[replay.Str(sr["registryArn"])]
		if !ok {
			return nil, fmt.Errorf("Cloud Map service %q is not declared", replay.Str(sr["registryArn"]))
		}
		svc.Registry = name
	}
	for _, d := range r.Deps {
		if n, ok := services[d[strings.LastIndex(d, "::")+2:]]; ok {
			svc.After = append(svc.After, n)
		}
	}
	return svc, nil
}

// num is v as an int: a JSON number (replay.Num), or a number in a string.
func num(v any) int {
	if x, ok := v.(string); ok {
		n, _ := strconv.Atoi(x)
		return n
	}
	return replay.Num(v)
}
