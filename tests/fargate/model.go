// Package fargate runs the aws stack's declared ECS services, as captured
// under Pulumi's mock engine, on a Docker engine the way Fargate runs them:
// one network namespace per task (its containers share localhost), each task
// its own address, reachability between tasks derived from the security
// groups, the task definition's user, read-only root, capabilities, init,
// ulimits, environment and secrets, CPU and memory for the task as a whole,
// task volumes as Fargate gives them, EFS access points as directories
// created with their creation info, Cloud Map names resolvable by DNS while
// a task is healthy, container dependsOn conditions, health checks, and a
// service scheduler that replaces a stopped or unhealthy task.
//
// Like the dev stack's replay (tests/e2e/replay), it maps each input it
// knows and fails loudly on any it does not: it can never silently run
// less than the stack declares. What it cannot reproduce (IAM, ENIs, image
// pulls, quotas, port-exact security groups) is listed in the README.
package fargate

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/e2e/replay"
)

// Model is what the replay runs, read from a capture of the aws stack.
type Model struct {
	TaskDefs     map[string]*TaskDef // by ARN
	Services     []*Service          // in declaration order
	Secrets      map[string]string   // secret ARN -> its value
	AccessPoints map[string]AccessPoint
	Groups       map[string]*Group           // security groups by ID
	Subnets      map[string]*Subnet          // subnets by ID (the VPC the stack creates; none with an existing VPC)
	Discovery    map[string]string           // Cloud Map service ARN -> DNS name (<service>.<namespace>)
	Images       map[string]capture.Resource // image reference a task definition names -> the image resource
	// PrefixLists are the S3 gateway endpoints' prefix lists (image layers).
	PrefixLists []string
	// EndpointGroups are the interface endpoints' security groups (ECR,
	// CloudWatch Logs, Secrets Manager); EFSGroups the mount targets' groups
	// of each file system.
	EndpointGroups []string
	EFSGroups      map[string][]string
}

// TaskDef is an ECS task definition as Fargate reads it.
type TaskDef struct {
	ARN, Family string
	CPU         int // CPU units (1024 per vCPU) for the task as a whole
	MemoryMiB   int // for the task as a whole
	// Arch is runtimePlatform.cpuArchitecture (X86_64 or ARM64).
	Arch       string
	Containers []Container
	Volumes    map[string]Volume
	// EphemeralGiB is the task storage asked for (0: the free 20 GiB).
	EphemeralGiB int
}

// Container is the part of an ECS container definition the replay runs.
// Unknown fields are refused (DisallowUnknownFields): a field it does not
// map would otherwise be silently dropped.
type Container struct {
	Name                   string            `json:"name"`
	Image                  string            `json:"image"`
	Essential              *bool             `json:"essential"`
	User                   string            `json:"user"`
	CPU                    int               `json:"cpu"`
	Memory                 int               `json:"memory"`
	MemoryReservation      int               `json:"memoryReservation"`
	ReadonlyRootFilesystem bool              `json:"readonlyRootFilesystem"`
	LinuxParameters        *LinuxParameters  `json:"linuxParameters"`
	Ulimits                []Ulimit          `json:"ulimits"`
	Environment            []KeyValue        `json:"environment"`
	Secrets                []SecretRef       `json:"secrets"`
	MountPoints            []MountPoint      `json:"mountPoints"`
	PortMappings           []PortMapping     `json:"portMappings"`
	VolumesFrom            []json.RawMessage `json:"volumesFrom"`
	SystemControls         []json.RawMessage `json:"systemControls"`
	LogConfiguration       *LogConfiguration `json:"logConfiguration"`
	HealthCheck            *HealthCheck      `json:"healthCheck"`
	StopTimeout            int               `json:"stopTimeout"`
	StartTimeout           int               `json:"startTimeout"`
	Command                []string          `json:"command"`
	EntryPoint             []string          `json:"entryPoint"`
	WorkingDirectory       string            `json:"workingDirectory"`
	DependsOn              []Dependency      `json:"dependsOn"`
	DockerLabels           map[string]string `json:"dockerLabels"`
}

// IsEssential is the container's essential flag (true unless said otherwise).
func (c Container) IsEssential() bool { return c.Essential == nil || *c.Essential }

// LinuxParameters: what Fargate supports of them.
type LinuxParameters struct {
	Capabilities       *Capabilities     `json:"capabilities"`
	InitProcessEnabled bool              `json:"initProcessEnabled"`
	Tmpfs              []json.RawMessage `json:"tmpfs"`
	Devices            []json.RawMessage `json:"devices"`
	SharedMemorySize   int               `json:"sharedMemorySize"`
}

// Capabilities added and dropped.
type Capabilities struct {
	Add  []string `json:"add"`
	Drop []string `json:"drop"`
}

// Ulimit is a resource limit.
type Ulimit struct {
	Name      string `json:"name"`
	SoftLimit int64  `json:"softLimit"`
	HardLimit int64  `json:"hardLimit"`
}

// KeyValue is an environment variable.
type KeyValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// SecretRef fills an environment variable from Secrets Manager at start.
type SecretRef struct {
	Name      string `json:"name"`
	ValueFrom string `json:"valueFrom"`
}

// MountPoint mounts a task volume.
type MountPoint struct {
	SourceVolume  string `json:"sourceVolume"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readOnly"`
}

// PortMapping declares a port (awsvpc: nothing is published on a host).
type PortMapping struct {
	ContainerPort int    `json:"containerPort"`
	HostPort      int    `json:"hostPort"`
	Protocol      string `json:"protocol"`
	Name          string `json:"name"`
}

// LogConfiguration: awslogs (the replay keeps the engine's json-file logs).
type LogConfiguration struct {
	LogDriver string            `json:"logDriver"`
	Options   map[string]string `json:"options"`
}

// HealthCheck is a container health check (seconds).
type HealthCheck struct {
	Command     []string `json:"command"`
	Interval    int      `json:"interval"`
	Timeout     int      `json:"timeout"`
	Retries     int      `json:"retries"`
	StartPeriod int      `json:"startPeriod"`
}

// Dependency is a dependsOn condition on another container of the task.
type Dependency struct {
	ContainerName string `json:"containerName"`
	Condition     string `json:"condition"`
}

// Volume is a task volume: an EFS access point, or (EFS nil) a bind volume
// on the task's own storage.
type Volume struct {
	Name string
	EFS  *EFSVolume
}

// EFSVolume is an EFS volume of a task definition.
type EFSVolume struct {
	FileSystemID, AccessPointID string
	TransitEncryption, IAM      string // ENABLED or DISABLED ("" is DISABLED)
	RootDirectory               string
}

// AccessPoint is an EFS access point: its root directory (created with the
// creation info when missing) and the POSIX identity every request through
// it is made as.
type AccessPoint struct {
	ID, Name, FileSystemID string
	Path                   string
	OwnerUID, OwnerGID     int
	Perms                  string // octal, such as 0700
	HasCreationInfo        bool
	UID, GID               int
}

// Service is an ECS service of one task definition.
type Service struct {
	Name     string // the ECS service name
	Resource string // its logical name
	TaskDef  string // ARN
	Groups   []string
	Subnets  []string
	Desired  int
	// Registry is the Cloud Map DNS name the service's tasks register under
	// while healthy ("" for none).
	Registry   string
	WaitSteady bool
	// After are the logical names of the services it depends on (Pulumi
	// creates it once they are created, and waits for their steady state
	// where they ask).
	After []string
	// PublicIP: assignPublicIp.
	PublicIP bool
}

// Group is a security group: its rules, one TCP (or all) port range each.
type Group struct {
	ID, Name        string
	Ingress, Egress []Rule
}

// Rule is one security group rule.
type Rule struct {
	Protocol         string // tcp, udp, -1 (all)
	FromPort, ToPort int
	Peer             string // security group ID
	CIDRs            []netip.Prefix
	PrefixLists      []string
	Description      string
}

// Subnet is a subnet and whether its route table has a default route out.
type Subnet struct {
	ID, Name   string
	CIDR       netip.Prefix
	RouteTable string
	RouteOut   bool // 0.0.0.0/0 to a NAT or internet gateway
}

// known are the inputs the replay maps, per resource type it reads; any
// other input of these types fails Read loudly.
var known = map[string][]string{
	capture.TypeTaskDefinition: {"family", "requiresCompatibilities", "networkMode", "cpu", "memory", "runtimePlatform",
		"executionRoleArn", "taskRoleArn", "containerDefinitions", "volumes", "tags", "ephemeralStorage"},
	capture.TypeService: {"name", "cluster", "taskDefinition", "desiredCount", "launchType", "platformVersion",
		"networkConfiguration", "deploymentCircuitBreaker", "deploymentMinimumHealthyPercent", "deploymentMaximumPercent",
		"enableExecuteCommand", "enableEcsManagedTags", "propagateTags", "triggers", "forceNewDeployment", "tags",
		"serviceRegistries", "waitForSteadyState"},
	capture.TypeSGRule: {"type", "securityGroupId", "protocol", "fromPort", "toPort", "sourceSecurityGroupId",
		"cidrBlocks", "prefixListIds", "description", "self"},
	capture.TypeSecurityGroup: {"vpcId", "description", "revokeRulesOnDelete", "tags", "name", "namePrefix"},
	capture.TypeAccessPoint:   {"fileSystemId", "rootDirectory", "posixUser", "tags"},
	capture.TypeSecretVersion: {"secretId", "secretString"},
	capture.TypeDiscovery:     {"name", "dnsConfig", "healthCheckCustomConfig", "forceDestroy", "tags", "description"},
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
		case capture.TypeSecret:
			secretByID[capture.MockID(r.Name)] = r.MockARN()
		case capture.TypeNamespace:
			namespaces[capture.MockID(r.Name)] = str(in["name"])
		case capture.TypeSecurityGroup:
			m.Groups[capture.MockID(r.Name)] = &Group{ID: capture.MockID(r.Name), Name: r.Name}
		case capture.TypeRoute:
			if str(in["destinationCidrBlock"]) == "0.0.0.0/0" && (str(in["natGatewayId"]) != "" || str(in["gatewayId"]) != "") {
				routeTables[str(in["routeTableId"])] = true
			}
		case capture.TypeRouteTableAssoc:
			assoc[str(in["subnetId"])] = str(in["routeTableId"])
		case capture.TypeSubnet:
			p, err := netip.ParsePrefix(str(in["cidrBlock"]))
			if err != nil {
				problems = append(problems, fmt.Sprintf("subnet %s: %v", r.Name, err))
				continue
			}
			m.Subnets[capture.MockID(r.Name)] = &Subnet{ID: capture.MockID(r.Name), Name: r.Name, CIDR: p}
		case capture.TypeVpcEndpoint:
			if str(in["vpcEndpointType"]) == "Gateway" {
				m.PrefixLists = append(m.PrefixLists, capture.MockPrefixS3)
			} else {
				m.EndpointGroups = append(m.EndpointGroups, strs(in["securityGroupIds"])...)
			}
		case capture.TypeMountTarget:
			fs := str(in["fileSystemId"])
			m.EFSGroups[fs] = append(m.EFSGroups[fs], strs(in["securityGroups"])...)
		case capture.TypeImage:
			// A task definition names a pushed image by <repository>@<digest>
			// (the mocks' repoDigest); a local one by its ID.
			name := str(in["imageName"])
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
		case capture.TypeSecretVersion:
			arn, ok := secretByID[str(in["secretId"])]
			if !ok {
				err = fmt.Errorf("secret %q is not declared", str(in["secretId"]))
				break
			}
			m.Secrets[arn] = str(in["secretString"])
		case capture.TypeAccessPoint:
			var ap AccessPoint
			ap, err = readAccessPoint(r, in)
			m.AccessPoints[ap.ID] = ap
		case capture.TypeSGRule:
			err = m.readRule(in)
		case capture.TypeDiscovery:
			dns, _ := in["dnsConfig"].(map[string]any)
			ns, ok := namespaces[str(dns["namespaceId"])]
			if !ok {
				err = fmt.Errorf("namespace %q is not declared", str(dns["namespaceId"]))
				break
			}
			m.Discovery[r.MockARN()] = str(in["name"]) + "." + ns
		case capture.TypeTaskDefinition:
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
		if r.Type == capture.TypeService {
			byURN[r.Name] = r.Name
		}
	}
	for _, r := range s.Resources {
		if r.Type != capture.TypeService {
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
	ap := AccessPoint{ID: capture.MockID(r.Name), Name: r.Name, FileSystemID: str(in["fileSystemId"])}
	root, _ := in["rootDirectory"].(map[string]any)
	ap.Path = str(root["path"])
	if ap.Path == "" {
		ap.Path = "/"
	}
	if ci, ok := root["creationInfo"].(map[string]any); ok {
		ap.HasCreationInfo = true
		ap.OwnerUID, ap.OwnerGID, ap.Perms = num(ci["ownerUid"]), num(ci["ownerGid"]), str(ci["permissions"])
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
	g := m.Groups[str(in["securityGroupId"])]
	if g == nil {
		return fmt.Errorf("security group %q is not declared", str(in["securityGroupId"]))
	}
	r := Rule{Protocol: str(in["protocol"]), FromPort: num(in["fromPort"]), ToPort: num(in["toPort"]),
		Peer: str(in["sourceSecurityGroupId"]), PrefixLists: strs(in["prefixListIds"]), Description: str(in["description"])}
	if in["self"] == true {
		r.Peer = g.ID
	}
	for _, c := range strs(in["cidrBlocks"]) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("cidr %q: %v", c, err)
		}
		r.CIDRs = append(r.CIDRs, p)
	}
	switch str(in["type"]) {
	case "ingress":
		g.Ingress = append(g.Ingress, r)
	case "egress":
		g.Egress = append(g.Egress, r)
	default:
		return fmt.Errorf("rule type %q", str(in["type"]))
	}
	return nil
}

func readTaskDef(r capture.Resource, in map[string]any) (*TaskDef, error) {
	td := &TaskDef{ARN: r.MockARN(), Family: str(in["family"]), Volumes: map[string]Volume{}}
	if !slices.Contains(strs(in["requiresCompatibilities"]), "FARGATE") {
		return nil, fmt.Errorf("requiresCompatibilities %v: the replay runs FARGATE task definitions", in["requiresCompatibilities"])
	}
	if mode := str(in["networkMode"]); mode != "awsvpc" {
		return nil, fmt.Errorf("networkMode %q: Fargate runs awsvpc only", mode)
	}
	var err error
	if td.CPU, err = strconv.Atoi(str(in["cpu"])); err != nil {
		return nil, fmt.Errorf("cpu %q: Fargate needs the task's CPU units", str(in["cpu"]))
	}
	if td.MemoryMiB, err = strconv.Atoi(str(in["memory"])); err != nil {
		return nil, fmt.Errorf("memory %q: Fargate needs the task's memory", str(in["memory"]))
	}
	rp, _ := in["runtimePlatform"].(map[string]any)
	td.Arch = str(rp["cpuArchitecture"])
	if td.Arch == "" {
		td.Arch = "X86_64"
	}
	if es, ok := in["ephemeralStorage"].(map[string]any); ok {
		td.EphemeralGiB = num(es["sizeInGib"])
	}
	dec := json.NewDecoder(strings.NewReader(str(in["containerDefinitions"])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&td.Containers); err != nil {
		return nil, fmt.Errorf("containerDefinitions: %v (a field the replay does not map is refused)", err)
	}
	for _, v := range list(in["volumes"]) {
		vm, _ := v.(map[string]any)
		vol := Volume{Name: str(vm["name"])}
		for k := range vm {
			if k != "name" && k != "efsVolumeConfiguration" {
				return nil, fmt.Errorf("volume %s: %q is not mapped by the Fargate replay", vol.Name, k)
			}
		}
		if efs, ok := vm["efsVolumeConfiguration"].(map[string]any); ok {
			auth, _ := efs["authorizationConfig"].(map[string]any)
			vol.EFS = &EFSVolume{FileSystemID: str(efs["fileSystemId"]), TransitEncryption: str(efs["transitEncryption"]),
				RootDirectory: str(efs["rootDirectory"]), AccessPointID: str(auth["accessPointId"]), IAM: str(auth["iam"])}
		}
		td.Volumes[vol.Name] = vol
	}
	return td, td.check()
}

// check holds a task definition to what ECS and Fargate accept when it is
// registered or run: what the replay would otherwise run differently.
func (td *TaskDef) check() error {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	names := map[string]bool{}
	for _, c := range td.Containers {
		names[c.Name] = true
	}
	essential := 0
	for _, c := range td.Containers {
		if c.IsEssential() {
			essential++
		}
		if lp := c.LinuxParameters; lp != nil {
			if len(lp.Tmpfs) > 0 {
				bad("container %s: linuxParameters.tmpfs is not supported on Fargate", c.Name)
			}
			if len(lp.Devices) > 0 {
				bad("container %s: linuxParameters.devices is not supported on Fargate", c.Name)
			}
			if lp.Capabilities != nil {
				for _, a := range lp.Capabilities.Add {
					if a != "SYS_PTRACE" {
						bad("container %s: Fargate can add only SYS_PTRACE, not %s", c.Name, a)
					}
				}
			}
		}
		if len(c.VolumesFrom) > 0 || len(c.SystemControls) > 0 {
			bad("container %s: volumesFrom and systemControls are not mapped by the Fargate replay", c.Name)
		}
		for _, mp := range c.MountPoints {
			if _, ok := td.Volumes[mp.SourceVolume]; !ok {
				bad("container %s: mount point %s names no volume of the task", c.Name, mp.SourceVolume)
			}
		}
		for _, d := range c.DependsOn {
			if !names[d.ContainerName] || d.ContainerName == c.Name {
				bad("container %s: dependsOn %s is not another container of the task", c.Name, d.ContainerName)
			}
			if !slices.Contains([]string{"START", "COMPLETE", "SUCCESS", "HEALTHY"}, d.Condition) {
				bad("container %s: dependsOn condition %q", c.Name, d.Condition)
			}
		}
		if h := c.HealthCheck; h != nil {
			// ECS's ranges (RegisterTaskDefinition, HealthCheck).
			if h.Interval != 0 && (h.Interval < 5 || h.Interval > 300) || h.Timeout != 0 && (h.Timeout < 2 || h.Timeout > 60) ||
				h.Retries != 0 && (h.Retries < 1 || h.Retries > 10) || h.StartPeriod < 0 || h.StartPeriod > 300 {
				bad("container %s: health check %+v outside ECS's ranges (interval 5-300, timeout 2-60, retries 1-10, startPeriod 0-300)", c.Name, *h)
			}
			if len(h.Command) == 0 || (h.Command[0] != "CMD" && h.Command[0] != "CMD-SHELL") {
				bad("container %s: health check command %q must start with CMD or CMD-SHELL", c.Name, h.Command)
			}
		}
	}
	if essential == 0 {
		bad("no essential container")
	}
	for _, v := range td.Volumes {
		// ECS: an EFS volume with an access point or IAM authorization
		// requires transit encryption.
		if e := v.EFS; e != nil && (e.AccessPointID != "" || e.IAM == "ENABLED") && e.TransitEncryption != "ENABLED" {
			bad("volume %s: an access point or IAM authorization requires transitEncryption ENABLED", v.Name)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func (m *Model) readService(r capture.Resource, in map[string]any, services map[string]string) (*Service, error) {
	svc := &Service{Name: str(in["name"]), Resource: r.Name, TaskDef: str(in["taskDefinition"]), Desired: num(in["desiredCount"]),
		WaitSteady: in["waitForSteadyState"] == true}
	if svc.Name == "" {
		svc.Name = r.Name
	}
	if lt := str(in["launchType"]); lt != "FARGATE" {
		return nil, fmt.Errorf("launchType %q: the replay runs FARGATE services", lt)
	}
	if _, ok := m.TaskDefs[svc.TaskDef]; !ok {
		return nil, fmt.Errorf("task definition %q is not declared", svc.TaskDef)
	}
	nc, _ := in["networkConfiguration"].(map[string]any)
	svc.Groups, svc.Subnets, svc.PublicIP = strs(nc["securityGroups"]), strs(nc["subnets"]), nc["assignPublicIp"] == true
	if len(svc.Groups) == 0 {
		return nil, fmt.Errorf("no security groups")
	}
	for _, g := range svc.Groups {
		if m.Groups[g] == nil {
			return nil, fmt.Errorf("security group %q is not declared", g)
		}
	}
	if sr, ok := in["serviceRegistries"].(map[string]any); ok {
		name, ok := m.Discovery[str(sr["registryArn"])]
		if !ok {
			return nil, fmt.Errorf("Cloud Map service %q is not declared", str(sr["registryArn"]))
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

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, str(e))
	}
	return out
}
