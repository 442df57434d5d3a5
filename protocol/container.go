package protocol

import "path"

// Paths inside every agent container.
const (
	ContainerSharedDir = "/shared"
	// The agent's credentials directory: a directory, not a single file, so
	// a key replaced on the host (by rename) reaches a running agent.
	ContainerCredsDir  = "/etc/flock/creds"
	ContainerCredsFile = ContainerCredsDir + "/nats.nk"
)

// ContainerAgentDir is where an agent sees its own directory.
func ContainerAgentDir(id string) string { return path.Join(ContainerSharedDir, "agents", id) }

// ContainerLogFile is where an agent writes its log.
func ContainerLogFile(id string) string { return path.Join(ContainerSharedDir, "logs", id+".log") }

// ContainerCommonDir is where every agent sees common, read-only.
func ContainerCommonDir() string { return path.Join(ContainerSharedDir, "common") }

// The environment the stacks give an agent (the agent reads more, with
// defaults; these are the ones both sides name).
const (
	EnvAgentID     = "AGENT_ID"
	EnvNATSURL     = "NATS_URL"
	EnvSharedDir   = "SHARED_DIR"
	EnvNkeyFile    = "NATS_NKEY_FILE"
	EnvNkeySeed    = "NATS_NKEY_SEED" // aws: ECS fills it from Secrets Manager
	EnvHeartbeat   = "HEARTBEAT_INTERVAL"
	EnvTaskTimeout = "TASK_TIMEOUT"
	EnvConcurrency = "CONCURRENCY"
	EnvStatusFile  = "STATUS_FILE"
	// EnvProgram is the agent program, a JSON array of argv: a long-lived
	// process the agent runs beside its tasks and restarts when it exits.
	EnvProgram = "AGENT_PROGRAM"
)

// The flock CLI's environment: the operator's commands, and `flock mcp` in
// an agent's task (FLOCK_ prefixed, so the agent's own variables never
// configure it by accident).
const (
	EnvCLINATSURL  = "FLOCK_NATS_URL"
	EnvCLINkeyFile = "FLOCK_NKEY_FILE"
	EnvCLINkeySeed = "FLOCK_NKEY_SEED" // aws: ECS fills it from Secrets Manager
)

// Labels on every container of a flock (Docker) and tags on every resource
// (AWS): which flock, which role (bus, agent, operator), which agent. The
// policy pack finds the flock's parts by them.
const (
	LabelFlock = "ai-flock.flock"
	LabelRole  = "ai-flock.role"
	LabelAgent = "ai-flock.agent"
	// LabelDiskMiB is an agent's disk quota: a new size recreates the container.
	LabelDiskMiB = "ai-flock.disk-mib"
)

// Roles (LabelRole) of a flock's containers and services.
const (
	RoleAgent    = "agent"
	RoleBus      = "bus"
	RoleOperator = "operator"
	RoleServices = "services" // the flock's own services (the board)
)
