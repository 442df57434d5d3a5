package awsflock

import (
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// declareOperator: a task definition (no service) the operator runs on demand
// (aws ecs run-task) to reach the bus from inside the VPC with the operator
// credentials, and to fill common.
func (d *declarer) declareOperator() error {
	lg, err := d.logGroup("operator", "operator", "", TaskLogGroupName(d.ctx.Stack(), d.name, "operator"))
	if err != nil {
		return err
	}
	s, v, err := d.secret("operator-nkey", "operator", "", "AI Flock "+d.name+": the operator's NATS nkey seed",
		pulumi.ToSecret(pulumi.String(d.args.OperatorSeed)).(pulumi.StringOutput))
	if err != nil {
		return err
	}
	t := &task{
		key: "operator", role: "operator", uid: OperatorUID(d.m), gid: OperatorUID(d.m), limits: flock.DefaultLimits,
		image: d.agentImg.RepoDigest, logGroup: lg,
		env: map[string]string{
			protocol.EnvCLINATSURL: BusURL(d.m, d.args.Namespace), protocol.EnvSharedDir: protocol.ContainerSharedDir,
		},
		secrets: []secretRef{{env: protocol.EnvCLINkeySeed, arn: s.Arn}},
		// Run as is, it lists the agents; `aws ecs run-task --overrides`
		// gives it any other operator command (infra/awsflock/README.md).
		command: []string{"agents"},
		volumes: []volume{{name: VolumeCommon, ap: d.commonWriterAP, path: protocol.ContainerCommonDir()}},
		rw:      []*efs.AccessPoint{d.commonWriterAP},
		deps:    []pulumi.Resource{v},
	}
	d.operatorTask, err = d.define(t)
	return err
}
