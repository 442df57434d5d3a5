package rules

import (
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
)

// Level is a policy's enforcement level. The zero value is deliberately not a
// level: every policy states its own (policyx would read an unset level as
// advisory).
type Level int

const (
	levelUnset Level = iota
	// Advisory violations are reported; the deployment goes on.
	Advisory
	// Mandatory violations fail `pulumi preview` and stop `pulumi up`.
	Mandatory
)

func (l Level) String() string {
	switch l {
	case Advisory:
		return "advisory"
	case Mandatory:
		return "mandatory"
	}
	return "unset"
}

// Policy is one rule of the pack: exactly one of Resource (with the Types it
// applies to) or Stack is set.
type Policy struct {
	Name        string
	Description string // what the policy protects against
	Level       Level
	Types       []string
	Resource    func(Resource) []Finding
	Stack       func([]Resource) []Finding
}

// AppliesTo reports whether a resource policy checks resources of type t. A
// type ending in "*" stands for every type it prefixes ("aws:*": every
// resource of the aws provider).
func (p Policy) AppliesTo(t string) bool {
	return p.Resource != nil && slices.ContainsFunc(p.Types, func(pt string) bool {
		if prefix, wild := strings.CutSuffix(pt, "*"); wild {
			return strings.HasPrefix(t, prefix)
		}
		return pt == t
	})
}

// CheckResource runs a resource policy on r (nothing when it does not apply).
func (p Policy) CheckResource(r Resource) []Violation {
	if !p.AppliesTo(r.Type) {
		return nil
	}
	return p.stamp(p.Resource(r))
}

// CheckStack runs a stack policy over every resource of a stack.
func (p Policy) CheckStack(rs []Resource) []Violation {
	if p.Stack == nil {
		return nil
	}
	return p.stamp(p.Stack(rs))
}

func (p Policy) stamp(fs []Finding) []Violation {
	var out []Violation
	for _, f := range fs {
		out = append(out, Violation{Policy: p.Name, Finding: f})
	}
	return out
}

// Check runs the whole pack over a stack the way the engine does: every
// resource policy on every resource, then every stack policy.
func Check(rs []Resource) []Violation {
	var out []Violation
	all := All()
	for _, r := range rs {
		for _, p := range all {
			out = append(out, p.CheckResource(r)...)
		}
	}
	for _, p := range all {
		out = append(out, p.CheckStack(rs)...)
	}
	return out
}

var (
	containers = []string{TypeContainer}
	networks   = []string{TypeNetwork}
	labelled   = []string{TypeContainer, TypeNetwork}
	taskDefs   = []string{awsrules.TypeTaskDefinition}
	sgTypes    = []string{awsrules.TypeSecurityGroup, awsrules.TypeSGIngressRule, awsrules.TypeSecurityGroupRule}
)

// All is the registry: every policy of the pack, in the order users read them.
func All() []Policy {
	return []Policy{
		// Docker containers (dev).
		{Name: "container-non-root-user", Level: Mandatory, Types: containers, Resource: containerNonRootUser,
			Description: "Containers run as an explicit non-root numeric UID:GID, so a breakout does not start as root."},
		{Name: "container-read-only-rootfs", Level: Mandatory, Types: containers, Resource: containerReadOnlyRootfs,
			Description: "Containers have a read-only root filesystem, so a compromised agent cannot alter its own image or persist there."},
		{Name: "container-drop-all-capabilities", Level: Mandatory, Types: containers, Resource: containerDropAllCapabilities,
			Description: "Containers drop every Linux capability and add none, shrinking what root-like operations a process can attempt."},
		{Name: "container-no-new-privileges", Level: Mandatory, Types: containers, Resource: containerNoNewPrivileges,
			Description: "Containers set no-new-privileges, so setuid binaries cannot raise a process's privileges."},
		{Name: "container-not-privileged", Level: Mandatory, Types: containers, Resource: containerNotPrivileged,
			Description: "Containers are never privileged (all devices and capabilities of the host)."},
		{Name: "container-no-host-namespaces", Level: Mandatory, Types: containers, Resource: containerNoHostNamespaces,
			Description: "Containers share no namespace with the host or another container (network, pid, ipc, user, cgroup)."},
		{Name: "container-memory-cpu-limits", Level: Mandatory, Types: containers, Resource: containerMemoryCPULimits,
			Description: "Containers have a memory limit with swap equal to it and a CPU quota, so one agent cannot starve the host."},
		{Name: "container-process-limit", Level: Mandatory, Types: containers, Resource: containerProcessLimit,
			Description: "Containers carry an nproc ulimit (with the per-container pids-limit step, a fork bomb cannot take the host)."},
		{Name: "container-published-ports", Level: Mandatory, Types: containers, Resource: containerPublishedPorts,
			Description: "No container publishes a port, except the bus's operator (4222), monitoring (8222) and metrics (9464) ports on 127.0.0.1."},
		{Name: "container-no-sensitive-host-paths", Level: Mandatory, Types: containers, Resource: containerNoSensitiveHostPaths,
			Description: "No container mounts the Docker socket, a host system directory or a host device: each of them is a way out to the host."},
		{Name: "container-not-default-bridge", Level: Mandatory, Types: containers, Resource: containerNotDefaultBridge,
			Description: "No container sits on the default bridge, where every container can reach every other."},
		{Name: "container-no-unconfined-profile", Level: Mandatory, Types: containers, Resource: containerNoUnconfinedProfile,
			Description: "Seccomp and AppArmor stay on: no seccomp=unconfined, apparmor=unconfined, label=disable or systempaths=unconfined."},
		{Name: "container-healthcheck", Level: Advisory, Types: containers, Resource: containerHealthcheck,
			Description: "Containers have a healthcheck, so a hung agent or bus is noticed and restarted."},
		{Name: "container-own-shared-dirs", Level: Mandatory, Types: containers, Resource: containerOwnSharedDirs,
			Description: "An agent mounts only its own directory, log file and credentials, and common read-only: never the shared root or another agent's files."},
		{Name: "docker-flock-labels", Level: Mandatory, Types: labelled, Resource: dockerFlockLabels,
			Description: "Containers and networks carry the ai-flock labels (flock, role, agent) the per-agent policies rely on, so nothing escapes them unlabelled."},
		// Docker networks (dev).
		{Name: "network-agent-internal", Level: Mandatory, Types: networks, Resource: networkAgentInternal,
			Description: "Agent networks are internal: no route to the host or the internet, only to the bus."},
		// ECS (aws).
		{Name: "ecs-task-awsvpc", Level: Mandatory, Types: taskDefs, Resource: ecsTaskAWSVPC,
			Description: "Task definitions use awsvpc networking, so every task has its own interface and security groups."},
		{Name: "ecs-task-non-root-user", Level: Mandatory, Types: taskDefs, Resource: ecsTaskNonRootUser,
			Description: "Every container of a task runs as an explicit non-root numeric user."},
		{Name: "ecs-task-read-only-rootfs", Level: Mandatory, Types: taskDefs, Resource: ecsTaskReadOnlyRootfs,
			Description: "Every container of a task has a read-only root filesystem."},
		{Name: "ecs-task-not-privileged", Level: Mandatory, Types: taskDefs, Resource: ecsTaskNotPrivileged,
			Description: "No container of a task is privileged."},
		{Name: "ecs-task-drop-all-capabilities", Level: Mandatory, Types: taskDefs, Resource: ecsTaskDropAllCapabilities,
			Description: "Every container of a task drops all Linux capabilities and adds none."},
		{Name: "ecs-task-memory-limits", Level: Mandatory, Types: taskDefs, Resource: ecsTaskMemoryLimits,
			Description: "Task definitions declare their memory, so one agent cannot take more than its share."},
		{Name: "ecs-task-logging", Level: Mandatory, Types: taskDefs, Resource: ecsTaskLogging,
			Description: "Every container of a task sends its logs somewhere (CloudWatch), so what an agent did can be audited."},
		{Name: "ecs-task-no-secret-env", Level: Mandatory, Types: taskDefs, Resource: ecsTaskNoSecretEnv,
			Description: "No secret-looking value sits in a task's plain environment; credentials go through secrets (Secrets Manager or SSM)."},
		{Name: "ecs-task-efs-encryption-iam", Level: Mandatory, Types: taskDefs, Resource: ecsTaskEFSEncryptionIAM,
			Description: "EFS volumes are mounted with transit encryption and IAM authorization, so the task role decides what a task may mount."},
		{Name: "ecs-task-efs-access-point", Level: Mandatory, Types: taskDefs, Resource: ecsTaskEFSAccessPoint,
			Description: "EFS volumes are mounted through an access point, never the bare file system, so each mount is confined to one directory and POSIX user."},
		{Name: "ecs-service-no-public-ip", Level: Mandatory, Types: []string{awsrules.TypeService}, Resource: ecsServiceNoPublicIP,
			Description: "ECS services give their tasks no public IP: agents are not reachable from the internet."},
		// EFS, security groups, logs (aws).
		{Name: "vpc-endpoint-own-account", Level: Mandatory, Types: []string{awsrules.TypeVpcEndpoint}, Resource: vpcEndpointOwnAccount,
			Description: "Every interface endpoint has a policy allowing this account's callers only: AWS's default policy lets a task use the endpoint with another account's keys, a way out of the VPC."},
		{Name: "efs-encrypted", Level: Mandatory, Types: []string{awsrules.TypeFileSystem}, Resource: efsEncrypted,
			Description: "EFS file systems are encrypted at rest."},
		{Name: "efs-access-point-posix-user", Level: Mandatory, Types: []string{awsrules.TypeAccessPoint}, Resource: efsAccessPointPosixUser,
			Description: "EFS access points force a non-root POSIX user, so a client cannot act as any user it likes."},
		{Name: "efs-access-point-root-path", Level: Mandatory, Types: []string{awsrules.TypeAccessPoint}, Resource: efsAccessPointRootPath,
			Description: "EFS access points serve one directory, never the file system root."},
		{Name: "security-group-no-world-ingress", Level: Mandatory, Types: sgTypes, Resource: securityGroupNoWorldIngress,
			Description: "No security group admits ingress from 0.0.0.0/0 or ::/0."},
		{Name: "log-group-retention", Level: Advisory, Types: []string{awsrules.TypeLogGroup}, Resource: logGroupRetention,
			Description: "CloudWatch log groups have a retention period, so logs are not kept (and paid for) forever."},
		// What AWS accepts in the inputs (aws): infra/awsrules, the table the
		// component's config validation checks too. AWS refuses such a value
		// only at deploy, after a clean preview.
		{Name: "aws-security-group-text", Level: Mandatory, Types: []string{awsrules.TypeSecurityGroup, awsrules.TypeSecurityGroupRule, awsrules.TypeSGIngressRule, awsrules.TypeSGEgressRule}, Resource: awsSecurityGroupText,
			Description: "Security group names and descriptions, and security group rule descriptions, are what EC2 accepts: at most 255 of a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$* (no apostrophe), no name starting with sg-."},
		{Name: "aws-iam-names", Level: Mandatory, Types: []string{awsrules.TypeRole, awsrules.TypeRolePolicy}, Resource: awsIAMNames,
			Description: "IAM role names (an auto-named role: its logical name plus 8 characters) are at most 64 of [\\w+=,.@-] (a namePrefix 38), role descriptions at most 1000 printable Latin-1 characters, role policy names at most 128 of [\\w+=,.@-]."},
		{Name: "aws-ecs-names", Level: Mandatory, Types: []string{awsrules.TypeTaskDefinition, awsrules.TypeService, awsrules.TypeCluster}, Resource: awsECSNames,
			Description: "ECS task definition families, container names, service and cluster names are at most 255 letters, digits, _ and -."},
		{Name: "aws-ecs-health-check", Level: Mandatory, Types: taskDefs, Resource: awsECSHealthCheck,
			Description: "Container health checks are in ECS's ranges: interval 5-300 s, timeout 2-60 s, retries 1-10, startPeriod 0-300 s."},
		{Name: "aws-log-group-name", Level: Mandatory, Types: []string{awsrules.TypeLogGroup}, Resource: awsLogGroupName,
			Description: "CloudWatch log group names are 1 to 512 characters of letters, digits and . - _ / #."},
		{Name: "aws-cloud-map-names", Level: Mandatory, Types: []string{awsrules.TypeDiscoveryService, awsrules.TypeNamespace}, Resource: awsCloudMapNames,
			Description: "Cloud Map service names are one DNS label (at most 63 letters, digits and -), namespace names DNS names of at most 253 characters."},
		{Name: "aws-ecr-repository-name", Level: Mandatory, Types: []string{awsrules.TypeRepository}, Resource: awsECRRepositoryName,
			Description: "ECR repository names are 2 to 256 lower-case letters, digits and single . _ - between them, in / separated components."},
		{Name: "aws-efs-access-point-path", Level: Mandatory, Types: []string{awsrules.TypeAccessPoint}, Resource: awsEFSAccessPointPath,
			Description: "EFS access point root directories are absolute paths of at most 100 characters and four levels, without $#<>;`|&?{}^*."},
		{Name: "aws-secret-name", Level: Mandatory, Types: []string{awsrules.TypeSecret}, Resource: awsSecretName,
			Description: "Secrets Manager secret names (an auto-named secret: its logical name plus 8 characters) are at most 512 ASCII letters, digits and /_+=.@-."},
		{Name: "aws-tags", Level: Mandatory, Types: []string{awsrules.TypeAny}, Resource: awsTagLimits,
			Description: "Tags on every aws resource have keys of 1 to 128 and values of at most 256 letters, digits, spaces and _ . : / = + - @, none starting with aws:."},
		// The whole stack (both targets).
		{Name: "stack-unique-agent-uid", Level: Mandatory, Stack: stackUniqueAgentUID,
			Description: "Every agent (and the bus) has its own UID: a shared UID shares the nproc limit and file ownership."},
		{Name: "stack-agent-own-directory", Level: Mandatory, Stack: stackAgentOwnDirectory,
			Description: "Every agent has its own directory (dev) or EFS access point (aws), owned by its UID, that no other agent mounts as its own."},
		{Name: "stack-agent-own-network", Level: Mandatory, Stack: stackAgentOwnNetwork,
			Description: "Every agent has its own network (dev) or an ingress-free security group (aws): no agent can reach another."},
		{Name: "stack-nothing-private-shared", Level: Mandatory, Stack: stackNothingPrivateShared,
			Description: "Nothing private is shared: no container or task mounts another agent's directory, log or credentials (or a directory above them), and what is shared is read-only."},
		{Name: "stack-bus-routes-self-only", Level: Mandatory, Stack: stackBusRoutesSelfOnly,
			Description: "The bus's security group admits the NATS route port (6222) from itself only: no agent, operator or address range can join the bus cluster as a node."},
		{Name: "stack-services-apart", Level: Mandatory, Stack: stackServicesApart,
			Description: "The flock's services (the board) join only their own internal network (dev), which no other container joins: nothing but the bus reaches them, and they reach nothing but the bus."},
		{Name: "stack-aws-services-no-ingress", Level: Mandatory, Stack: stackAWSServicesNoIngress,
			Description: "The flock's services (the board) admit nothing on aws: their security group has no ingress, inline or by a rule, and their service runs in that group of its own; they reach the bus and the AWS endpoints only."},
		{Name: "stack-aws-dns-firewall", Level: Mandatory, Stack: stackAWSDNSFirewall,
			Description: "An aws flock's VPC resolves only what a rule allows: a Route 53 Resolver DNS Firewall rule group is associated with it, whose last rule blocks every name and whose other rules allow named domains only (no \"*\", no \"*.\" over a top-level domain), and the VPC's firewall fails closed; else a task moves data out in the names it looks up."},
		{Name: "stack-pids-limit-step", Level: Mandatory, Stack: stackPidsLimitStep,
			Description: "Every agent container has its pids-limit step (docker update --pids-limit), the real cgroup PIDs limit pulumi-docker cannot set."},
		// The model gateway.
		{Name: "container-no-key-in-agent-env", Level: Mandatory, Types: containers, Resource: containerNoKeyInAgentEnv,
			Description: "No agent container's environment holds a credential (a variable named like a key, or a value shaped like a provider's key): the gateway holds the keys."},
		{Name: "stack-no-agent-on-egress", Level: Mandatory, Stack: stackNoAgentOnEgress,
			Description: "No agent joins the egress network, the flock's only network with a route out, at creation or by a network-connect step: only the gateway does."},
		{Name: "gateway-egress-ways-out", Level: Advisory, Types: []string{TypeCommand, awsrules.TypeTaskDefinition}, Resource: gatewayEgressWaysOut,
			Description: "Each egress rule that is a blind tunnel (the gateway cannot see inside it) or trusts roots besides the system's is named: both are the operator's choice, and ways out to review."},
		// The model gateway (aws).
		{Name: "stack-aws-agents-no-route-out", Level: Mandatory, Stack: stackAWSAgentsNoRouteOut,
			Description: "With a model gateway on aws, agents have no route out: no agent service runs in a subnet whose route table reaches an internet or NAT gateway, and the agents' security group has no egress to 0.0.0.0/0 or ::/0; the gateway is the flock's one way out."},
		{Name: "ecs-task-no-gateway-key-in-agent", Level: Mandatory, Stack: ecsTaskNoGatewayKeyInAgent,
			Description: "No agent task reads a secret of the model gateway (an upstream's key, its bus seed) or holds an API key in its environment (a variable named *_API_KEY, *_SECRET* or *PASSWORD*, or a value like sk-ant-... or sk-...): the keys stay with the gateway."},
	}
}
