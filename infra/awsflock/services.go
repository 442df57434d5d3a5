package awsflock

import (
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/protocol"
)

// The flock's services (the board service, the metrics) on the aws target: one Fargate
// service, <flock>-services, of one task running /flock-services from the
// bus image as the services' own bus user (protocol.ServicesUser), its
// seed from a secret of its own (FLOCK_SERVICES_NKEY). It listens on
// nothing: it has no port, no Cloud Map name, and a security group that
// admits nothing, whose only egress is the bus (4222) and the AWS
// endpoints (its image, its secret, its logs). It mounts no EFS, so its
// task role is granted nothing. What it serves comes from the bus (the
// services bucket), so a new agent reaches the board without rolling it.

// RoleServices is the ai-flock:role of the services' resources, and their
// container's name.
const RoleServices = protocol.RoleServices

// ServicesKey names the services' resources (<flock>-services-…), their
// task definition family and log group.
const ServicesKey = "services"

// ServicesStartPeriod is the services' health check start period
// (seconds): they call themselves ready only once the bus's buckets exist
// and their configuration was read, which a new three-node bus has a few
// seconds after its nodes found each other. Until then a failing check
// does not count; after it, three failures (30 s) replace the task.
const ServicesStartPeriod = 120

// ServicesCommand is how the services' container runs the bus image.
var (
	ServicesEntryPoint = []string{"/flock-services"}
	ServicesCommand    = []string{"run"}
	ServicesHealth     = []string{"CMD", "/flock-services", "health"}
)

// declareServices: the services as a one-task service, hardened like the
// bus (read-only root, their own UID, no capabilities, init, nproc ulimit,
// /tmp and /run on task volumes, their own log group), started after the
// bus's last node, in the private subnets (no route out).
func (d *declarer) declareServices() error {
	s := d.m.Services
	lg, err := d.logGroup(ServicesKey, RoleServices, "", TaskLogGroupName(d.ctx.Stack(), d.name, ServicesKey))
	if err != nil {
		return err
	}
	seed := d.args.ServicesSeed
	sec, v, err := d.secret(ServicesKey+"-nkey", RoleServices, "", "AI Flock "+d.name+": the NATS nkey seed of the flock services (the board)",
		pulumi.ToSecret(pulumi.String(seed)).(pulumi.StringOutput))
	if err != nil {
		return err
	}
	env := map[string]string{
		// Every bus node, as agents reach them (Cloud Map names).
		protocol.EnvServicesNATSURL: BusURL(d.m, d.args.Namespace),
	}
	if d.m.OTLP.Endpoint != "" {
		// The spans they derive go to the gateway, which exports them.
		env[protocol.EnvServicesSpans] = "on"
	}
	if d.args.Metrics != protocol.EMFOff {
		// The metrics as EMF lines in their log: CloudWatch Logs makes
		// them metrics (namespace protocol.EMFNamespace, dimension Flock).
		env[protocol.EnvServicesEMF] = d.args.Metrics
		env[protocol.EnvServicesFlock] = MetricsFlock(d.ctx.Stack(), d.name)
	}
	t := &task{
		key: ServicesKey, role: RoleServices, uid: s.UID, gid: s.UID, limits: s.Limits,
		image: d.busImg.RepoDigest, logGroup: lg,
		env:         env,
		secrets:     []secretRef{{env: protocol.EnvServicesNkey, arn: sec.Arn}},
		entryPoint:  ServicesEntryPoint,
		command:     ServicesCommand,
		health:      ServicesHealth,
		healthStart: ServicesStartPeriod,
		deps:        []pulumi.Resource{v},
	}
	td, err := d.define(t)
	if err != nil {
		return err
	}
	// A new seed reaches the task only when it starts: its digest rolls it.
	triggers := pulumi.StringMap{"credentials": pulumi.String(digest("ai-flock/services-credentials", seed))}
	_, err = d.serve(t, td, d.sg.services.ID(), triggers, nil, []pulumi.Resource{d.bus}, false)
	return err
}
