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
	"net/netip"

	"github.com/ai-flock/ai-flock/tests/capture"
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
