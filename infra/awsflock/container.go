package awsflock

import (
	"encoding/json"
	"sort"
)

// ContainerDefinition is the part of an ECS container definition the flock
// uses, marshalled into the task definition's containerDefinitions. Fields
// ECS echoes back as empty lists are always written, so a refresh shows no diff.
type ContainerDefinition struct {
	Name                   string            `json:"name"`
	Image                  string            `json:"image"`
	Essential              bool              `json:"essential"`
	User                   string            `json:"user"`
	CPU                    int               `json:"cpu"`
	Memory                 int               `json:"memory"`
	ReadonlyRootFilesystem bool              `json:"readonlyRootFilesystem"`
	LinuxParameters        LinuxParameters   `json:"linuxParameters"`
	Ulimits                []Ulimit          `json:"ulimits"`
	Environment            []KeyValue        `json:"environment"`
	Secrets                []Secret          `json:"secrets"`
	MountPoints            []MountPoint      `json:"mountPoints"`
	PortMappings           []PortMapping     `json:"portMappings"`
	VolumesFrom            []struct{}        `json:"volumesFrom"`
	SystemControls         []struct{}        `json:"systemControls"`
	LogConfiguration       LogConfiguration  `json:"logConfiguration"`
	HealthCheck            *HealthCheck      `json:"healthCheck,omitempty"`
	StopTimeout            int               `json:"stopTimeout"`
	Command                []string          `json:"command,omitempty"`
	EntryPoint             []string          `json:"entryPoint,omitempty"`
	DockerLabels           map[string]string `json:"dockerLabels,omitempty"`
}

// LinuxParameters: capabilities and the init process (Fargate has no tmpfs, no devices).
type LinuxParameters struct {
	Capabilities       Capabilities `json:"capabilities"`
	InitProcessEnabled bool         `json:"initProcessEnabled"`
}

// Capabilities added and dropped (Fargate can add only SYS_PTRACE; the flock adds none).
type Capabilities struct {
	Add  []string `json:"add"`
	Drop []string `json:"drop"`
}

// Ulimit is a resource limit.
type Ulimit struct {
	Name      string `json:"name"`
	SoftLimit int    `json:"softLimit"`
	HardLimit int    `json:"hardLimit"`
}

// KeyValue is an environment variable.
type KeyValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Secret is an environment variable ECS fills from Secrets Manager at task start.
type Secret struct {
	Name      string `json:"name"`
	ValueFrom string `json:"valueFrom"`
}

// MountPoint mounts a task volume.
type MountPoint struct {
	SourceVolume  string `json:"sourceVolume"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readOnly"`
}

// PortMapping declares a port the container listens on (awsvpc: no host port is published).
type PortMapping struct {
	ContainerPort int    `json:"containerPort"`
	HostPort      int    `json:"hostPort"`
	Protocol      string `json:"protocol"`
	Name          string `json:"name,omitempty"`
}

// LogConfiguration sends the container's output to CloudWatch Logs.
type LogConfiguration struct {
	LogDriver string            `json:"logDriver"`
	Options   map[string]string `json:"options"`
}

// HealthCheck is the container health check (exec form: the images have no shell).
type HealthCheck struct {
	Command     []string `json:"command"`
	Interval    int      `json:"interval"`
	Timeout     int      `json:"timeout"`
	Retries     int      `json:"retries"`
	StartPeriod int      `json:"startPeriod"`
}

// env builds a sorted environment (ECS and the provider compare it sorted).
func env(kv map[string]string) []KeyValue {
	out := make([]KeyValue, 0, len(kv))
	for k, v := range kv {
		out = append(out, KeyValue{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ContainerDefinitions marshals the definitions of one task.
func ContainerDefinitions(defs ...ContainerDefinition) (string, error) {
	b, err := json.Marshal(defs)
	return string(b), err
}

// ParseContainerDefinitions reads a task definition's containerDefinitions (tests, policies).
func ParseContainerDefinitions(s string) ([]ContainerDefinition, error) {
	var defs []ContainerDefinition
	err := json.Unmarshal([]byte(s), &defs)
	return defs, err
}
