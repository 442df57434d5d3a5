package awsflock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/secretsmanager"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/servicediscovery"
	"github.com/pulumi/pulumi-command/sdk/go/command/local"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// Names of the task volumes.
const (
	VolumeAgent  = "agent"
	VolumeLogs   = "logs"
	VolumeCommon = "common"
	VolumeStore  = "store"
	VolumeTmp    = "tmp"
	VolumeRun    = "run"
)

// volume is an EFS access point mounted in a task.
type volume struct {
	name     string
	ap       *efs.AccessPoint
	path     string
	readOnly bool
}

// secretRef is an environment variable filled from a secret.
type secretRef struct {
	env string
	arn pulumi.StringOutput
}

// task is one task definition of the flock.
type task struct {
	key      string // name of its resources: <flock>-<key>-…
	role     string // ai-flock:role tag
	agent    string // ai-flock:agent tag
	uid, gid int
	limits   flock.Limits
	image    pulumi.StringOutput
	env      map[string]string
	secrets  []secretRef
	volumes  []volume
	rw, ro   []*efs.AccessPoint // what its task role may mount read-write and read-only
	ports    []PortMapping
	health   []string
	// healthStart is the health check's start period in seconds (0: 10 s).
	healthStart int
	// ephemeralGiB is the task storage asked of Fargate (0: its free 20 GiB).
	ephemeralGiB int
	command      []string
	// entryPoint overrides the image's (nil: the image's).
	entryPoint []string
	// ownInit: the command is an init of the image's own (an agent's
	// `flock-agent init`), so ECS adds none.
	ownInit bool
	// subnets are where its service runs (nil: the private subnets, which
	// have no route out).
	subnets  pulumi.StringArray
	logGroup *cloudwatch.LogGroup
	// deps are resources its tasks need before they start (policies, secret values).
	deps []pulumi.Resource
}

func (d *declarer) logGroup(key, role, agent, name string) (*cloudwatch.LogGroup, error) {
	lg, err := cloudwatch.NewLogGroup(d.ctx, d.n(key, "logs"), &cloudwatch.LogGroupArgs{
		Name:            pulumi.String(name),
		RetentionInDays: pulumi.Int(d.args.LogRetentionDays),
		Tags:            d.tags(role, agent),
	}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("log group: %w", err)
	}
	return lg, nil
}

// secret stores value (a Pulumi secret) in Secrets Manager. The secret's
// name is generated (autonamed): a replaced secret never waits for the
// deleted one's recovery window to free its name.
func (d *declarer) secret(name, role, agent, desc string, value pulumi.StringInput) (*secretsmanager.Secret, *secretsmanager.SecretVersion, error) {
	s, err := secretsmanager.NewSecret(d.ctx, d.n(name), &secretsmanager.SecretArgs{
		Description:          pulumi.String(desc),
		RecoveryWindowInDays: pulumi.Int(7),
		Tags:                 d.tags(role, agent),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("secret %s: %w", name, err)
	}
	v, err := secretsmanager.NewSecretVersion(d.ctx, d.n(name), &secretsmanager.SecretVersionArgs{
		SecretId: s.ID(), SecretString: value,
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("secret value %s: %w", name, err)
	}
	return s, v, nil
}

// define declares a task's roles and task definition.
func (d *declarer) define(t *task) (*ecs.TaskDefinition, error) {
	size, err := SizeFor(t.limits)
	if err != nil {
		return nil, err
	}
	exec, role, err := d.roles(t)
	if err != nil {
		return nil, err
	}
	volumes, mounts := d.volumes(t)
	defs := d.containerDefinitions(t, size, mounts)

	args := &ecs.TaskDefinitionArgs{
		Family:                  pulumi.String(TaskFamily(d.ctx.Stack(), d.name, t.key)),
		RequiresCompatibilities: pulumi.StringArray{pulumi.String("FARGATE")},
		NetworkMode:             pulumi.String("awsvpc"),
		Cpu:                     pulumi.String(strconv.Itoa(size.CPU)),
		Memory:                  pulumi.String(strconv.Itoa(size.Memory)),
		RuntimePlatform: ecs.TaskDefinitionRuntimePlatformArgs{
			OperatingSystemFamily: pulumi.String("LINUX"), CpuArchitecture: pulumi.String(string(d.args.CPUArchitecture)),
		},
		ExecutionRoleArn:     exec.Arn,
		TaskRoleArn:          role.Arn,
		ContainerDefinitions: defs,
		Volumes:              volumes,
		Tags:                 d.tags(t.role, t.agent),
	}
	if t.ephemeralGiB > 0 {
		args.EphemeralStorage = ecs.TaskDefinitionEphemeralStorageArgs{SizeInGib: pulumi.Int(t.ephemeralGiB)}
	}
	td, err := ecs.NewTaskDefinition(d.ctx, d.n(t.key, "task"), args, d.parent)
	if err != nil {
		return nil, fmt.Errorf("task definition: %w", err)
	}
	return td, nil
}

// roles declares the task's two roles: the execution role (what ECS does for
// the task: pull, log, inject its own secrets) and the task role (what the
// task's own code may do: mount its access points). Their policies go into
// t.deps.
func (d *declarer) roles(t *task) (exec, role *iam.Role, err error) {
	execDesc, taskDesc := roleDescriptions(d.name, t.key, len(t.rw)+len(t.ro) > 0)
	// Execution role: what ECS does for the task (pull, log, inject secrets).
	exec, err = iam.NewRole(d.ctx, d.n(t.key, "exec-role"), &iam.RoleArgs{
		Description:      pulumi.String(execDesc),
		AssumeRolePolicy: pulumi.String(ExecTrustPolicy()),
		Tags:             d.tags(t.role, t.agent),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("execution role: %w", err)
	}
	arns := make([]any, 0, 2+len(t.secrets))
	arns = append(arns, d.repo.Arn, t.logGroup.Arn)
	for _, s := range t.secrets {
		arns = append(arns, s.arn)
	}
	execPolicy, err := iam.NewRolePolicy(d.ctx, d.n(t.key, "exec-policy"), &iam.RolePolicyArgs{
		Role: exec.ID(),
		Policy: pulumi.All(arns...).ApplyT(func(v []any) string {
			var secrets []string
			for _, s := range v[2:] {
				// One secret may fill several variables (an agent's
				// gateway token): the policy names it once.
				if !slices.Contains(secrets, s.(string)) {
					secrets = append(secrets, s.(string))
				}
			}
			return ExecPolicy(v[0].(string), v[1].(string), secrets)
		}).(pulumi.StringOutput),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("execution policy: %w", err)
	}
	// Task role: what the task's own code may do, which is mount its access points.
	role, err = iam.NewRole(d.ctx, d.n(t.key, "task-role"), &iam.RoleArgs{
		Description:      pulumi.String(taskDesc),
		AssumeRolePolicy: pulumi.String(TaskTrustPolicy(d.partition, d.region, d.account)),
		Tags:             d.tags(t.role, t.agent),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("task role: %w", err)
	}
	t.deps = append(t.deps, execPolicy)
	if len(t.rw)+len(t.ro) == 0 {
		// Nothing to mount (a clustered bus node keeps its store on task
		// storage): the task role is granted nothing at all.
		return exec, role, nil
	}
	aps := []any{d.fs.Arn}
	for _, ap := range append(append([]*efs.AccessPoint{}, t.rw...), t.ro...) {
		aps = append(aps, ap.Arn)
	}
	nrw := len(t.rw)
	taskPolicy, err := iam.NewRolePolicy(d.ctx, d.n(t.key, "task-policy"), &iam.RolePolicyArgs{
		Role: role.ID(),
		Policy: pulumi.All(aps...).ApplyT(func(v []any) string {
			var rw, ro []string
			for i, a := range v[1:] {
				if i < nrw {
					rw = append(rw, a.(string))
				} else {
					ro = append(ro, a.(string))
				}
			}
			return MountPolicy(v[0].(string), rw, ro)
		}).(pulumi.StringOutput),
	}, d.parent)
	if err != nil {
		return nil, nil, fmt.Errorf("task policy: %w", err)
	}
	t.deps = append(t.deps, taskPolicy)
	return exec, role, nil
}

// volumes are the task's EFS access points and its scratch volumes, with
// where each is mounted.
func (d *declarer) volumes(t *task) (ecs.TaskDefinitionVolumeArray, []MountPoint) {
	volumes := ecs.TaskDefinitionVolumeArray{}
	mounts := []MountPoint{}
	for _, v := range t.volumes {
		volumes = append(volumes, ecs.TaskDefinitionVolumeArgs{
			Name: pulumi.String(v.name),
			EfsVolumeConfiguration: ecs.TaskDefinitionVolumeEfsVolumeConfigurationArgs{
				FileSystemId:      d.fs.ID(),
				TransitEncryption: pulumi.String("ENABLED"),
				AuthorizationConfig: ecs.TaskDefinitionVolumeEfsVolumeConfigurationAuthorizationConfigArgs{
					AccessPointId: v.ap.ID(), Iam: pulumi.String("ENABLED"),
				},
			},
		})
		mounts = append(mounts, MountPoint{SourceVolume: v.name, ContainerPath: v.path, ReadOnly: v.readOnly})
	}
	// Writable scratch without a writable root: Fargate has no tmpfs, so
	// /tmp and /run are ephemeral task volumes (task storage, gone with the task).
	for _, s := range []struct{ name, path string }{{VolumeTmp, ScratchTmp}, {VolumeRun, ScratchRun}} {
		volumes = append(volumes, ecs.TaskDefinitionVolumeArgs{Name: pulumi.String(s.name)})
		mounts = append(mounts, MountPoint{SourceVolume: s.name, ContainerPath: s.path})
	}
	return volumes, mounts
}

// containerDefinitions is the task's one container: hardened (read-only
// root, no capabilities, ulimits), its environment and secrets, its logs.
func (d *declarer) containerDefinitions(t *task, size TaskSize, mounts []MountPoint) pulumi.StringOutput {
	inputs := []any{t.image, t.logGroup.Name}
	for _, s := range t.secrets {
		inputs = append(inputs, s.arn)
	}
	cpu := ContainerCPU(t.limits)
	if cpu > size.CPU {
		cpu = size.CPU
	}
	defs := pulumi.All(inputs...).ApplyT(func(v []any) (string, error) {
		secrets := []Secret{}
		for i, s := range t.secrets {
			secrets = append(secrets, Secret{Name: s.env, ValueFrom: v[2+i].(string)})
		}
		ports := t.ports
		if ports == nil {
			ports = []PortMapping{}
		}
		c := ContainerDefinition{
			Name: t.role, Image: v[0].(string), Essential: true,
			User:   fmt.Sprintf("%d:%d", t.uid, t.gid),
			CPU:    cpu,
			Memory: t.limits.MemoryMiB,
			// Fargate offers no pids cgroup limit: RLIMIT_NPROC counts the
			// processes of the task's UID, and each task is its own microVM.
			Ulimits: []Ulimit{
				{Name: "core", SoftLimit: 0, HardLimit: 0},
				{Name: "nofile", SoftLimit: 1024, HardLimit: 4096},
				{Name: "nproc", SoftLimit: t.limits.Pids, HardLimit: t.limits.Pids},
			},
			ReadonlyRootFilesystem: true,
			LinuxParameters:        LinuxParameters{Capabilities: Capabilities{Add: []string{}, Drop: []string{"ALL"}}, InitProcessEnabled: !t.ownInit},
			Environment:            env(t.env),
			Secrets:                secrets,
			MountPoints:            mounts,
			PortMappings:           ports,
			VolumesFrom:            []struct{}{},
			SystemControls:         []struct{}{},
			LogConfiguration: LogConfiguration{LogDriver: "awslogs", Options: map[string]string{
				"awslogs-group": v[1].(string), "awslogs-region": d.region, "awslogs-stream-prefix": t.role,
				// A slow CloudWatch never blocks the agent's writes to stdout.
				"mode": "non-blocking", "max-buffer-size": "4m",
			}},
			StopTimeout: 30, // the agent drains its in-flight task on SIGTERM
			Command:     t.command,
			EntryPoint:  t.entryPoint,
		}
		if t.health != nil {
			start := t.healthStart
			if start == 0 {
				start = 10
			}
			c.HealthCheck = &HealthCheck{Command: t.health, Interval: 10, Timeout: 3, Retries: 3, StartPeriod: start}
		}
		return ContainerDefinitions(c)
	}).(pulumi.StringOutput)
	return defs
}

// serve runs a task definition as a service of exactly one task: never two
// copies (a new task starts after the old one stopped: the bus's store and an
// agent's directory have one writer), no public IP, rolled back by the
// deployment circuit breaker when a new revision cannot start.
//
// after are services this one starts after; steady makes the deployment
// wait until the service is stable (the nodes of a clustered bus, so each
// joins a cluster that has formed).
func (d *declarer) serve(t *task, td *ecs.TaskDefinition, sg pulumi.StringInput, triggers pulumi.StringMap, registry *servicediscovery.Service, after []pulumi.Resource, steady bool) (*ecs.Service, error) {
	subnets := d.subnets
	if t.subnets != nil {
		subnets = t.subnets
	}
	args := &ecs.ServiceArgs{
		Name:            pulumi.String(d.n(t.key)),
		Cluster:         d.cluster.Arn,
		TaskDefinition:  td.Arn,
		DesiredCount:    pulumi.Int(1),
		LaunchType:      pulumi.String("FARGATE"),
		PlatformVersion: pulumi.String("LATEST"),
		NetworkConfiguration: ecs.ServiceNetworkConfigurationArgs{
			Subnets: subnets, SecurityGroups: pulumi.StringArray{sg}, AssignPublicIp: pulumi.Bool(false),
		},
		DeploymentCircuitBreaker:        ecs.ServiceDeploymentCircuitBreakerArgs{Enable: pulumi.Bool(true), Rollback: pulumi.Bool(true)},
		DeploymentMinimumHealthyPercent: pulumi.Int(0),
		DeploymentMaximumPercent:        pulumi.Int(100),
		EnableExecuteCommand:            pulumi.Bool(false),
		EnableEcsManagedTags:            pulumi.Bool(true),
		PropagateTags:                   pulumi.String("SERVICE"),
		// A changed secret (credentials, bus config) reaches a task only when
		// it starts: the triggers hold a digest of it and roll the service.
		Triggers:           triggers,
		ForceNewDeployment: pulumi.Bool(true),
		Tags:               d.tags(t.role, t.agent),
	}
	if registry != nil {
		args.ServiceRegistries = ecs.ServiceServiceRegistriesArgs{RegistryArn: registry.Arn}
	}
	if steady {
		args.WaitForSteadyState = pulumi.Bool(true)
	}
	deps := append(append(append([]pulumi.Resource{}, d.ready...), t.deps...), after...)
	svc, err := ecs.NewService(d.ctx, d.n(t.key), args, d.parent, pulumi.DependsOn(deps),
		// The name is fixed, and one copy at a time is the point.
		pulumi.DeleteBeforeReplace(true))
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if err := d.verifyRollout(t, svc, td, triggers); err != nil {
		return nil, err
	}
	return svc, nil
}

// VerifyCommand is the rollout checker (infra/awsverify) the stack runs on
// the deploying machine, from the project's root (`make bin` builds it).
const VerifyCommand = "agent/bin/flock-aws-verify"

// verifyRollout runs the checker after each change of the service (a new
// task definition, or a secret that rolls it): `pulumi up` fails, naming
// the service and its deployment's state, when ECS rolled the change back
// or its tasks never started, where waiting for a steady state would pass.
func (d *declarer) verifyRollout(t *task, svc *ecs.Service, td *ecs.TaskDefinition, triggers pulumi.StringMap) error {
	_, err := local.NewCommand(d.ctx, d.n(t.key, "rollout"), &local.CommandArgs{
		Create: pulumi.Sprintf("%s --region %s --cluster %s --service %s --task-definition %s",
			VerifyCommand, d.region, d.cluster.Name, svc.Name, td.Arn),
		Triggers: pulumi.Array{td.Arn, triggers},
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{svc}))
	if err != nil {
		return fmt.Errorf("rollout check: %w", err)
	}
	return nil
}

// digest is a short, non-reversible fingerprint of secret material.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
