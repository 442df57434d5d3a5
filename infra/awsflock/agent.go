package awsflock

import (
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// declareAgent: everything of one agent is its own (log group, secret,
// roles, access points, task definition, service) and named after its ID,
// so adding or removing an agent never touches another.
func (d *declarer) declareAgent(a flock.Agent) error {
	lg, err := d.logGroup(a.ID, "agent", a.ID, LogGroupName(d.ctx.Stack(), d.name, a.ID))
	if err != nil {
		return err
	}
	seed := d.args.Seeds[a.ID]
	s, v, err := d.secret(a.ID+"-nkey", "agent", a.ID, "AI Flock "+d.name+": NATS nkey seed of agent "+a.ID,
		pulumi.ToSecret(pulumi.String(seed)).(pulumi.StringOutput))
	if err != nil {
		return err
	}
	dir, err := d.accessPoint(a.ID+"-dir-ap", "agent", a.ID, EFSAgentDir(a.ID), a.UID, a.GID, "0700", a.UID)
	if err != nil {
		return err
	}
	logs, err := d.accessPoint(a.ID+"-log-ap", "agent", a.ID, EFSLogDir(a.ID), a.UID, a.GID, "0700", a.UID)
	if err != nil {
		return err
	}
	t := &task{
		key: a.ID, role: "agent", agent: a.ID, uid: a.UID, gid: a.GID, limits: a.Limits,
		image: d.agentImg.RepoDigest, logGroup: lg,
		env: map[string]string{
			protocol.EnvAgentID:     a.ID,
			protocol.EnvNATSURL:     BusURL(d.m, d.args.Namespace),
			protocol.EnvSharedDir:   protocol.ContainerSharedDir,
			protocol.EnvHeartbeat:   d.m.Bus.Heartbeat.String(),
			protocol.EnvTaskTimeout: a.Limits.TaskTimeout.String(),
			protocol.EnvConcurrency: strconv.Itoa(a.Limits.Concurrency),
			// The status file (and the key the agent writes beside it for
			// its task processes) stay on the task's /run volume, which
			// the image declares (mode 1777): gone with the task, never
			// on EFS.
		},
		secrets: []secretRef{{env: protocol.EnvNkeySeed, arn: s.Arn}},
		volumes: []volume{
			{name: VolumeAgent, ap: dir, path: protocol.ContainerAgentDir(a.ID)},
			{name: VolumeCommon, ap: d.commonAP, path: protocol.ContainerCommonDir(), readOnly: true},
			{name: VolumeLogs, ap: logs, path: ContainerLogDir},
		},
		rw:     []*efs.AccessPoint{dir, logs},
		ro:     []*efs.AccessPoint{d.commonAP},
		health: []string{"CMD", "/flock-agent", "health"},
		deps:   []pulumi.Resource{v},
	}
	if a.Program != "" {
		t.env[protocol.EnvProgram] = a.Program
	}
	if own := d.ownImgs[a.Image.Key()]; own != nil {
		t.image = own.RepoDigest
		// The user's image may hold programs that want a home (caches,
		// config): the agent's own directory, the one place it may write.
		t.env["HOME"] = protocol.ContainerAgentDir(a.ID)
	}
	triggers := pulumi.StringMap{"credentials": pulumi.String(digest("ai-flock/credentials", seed))}
	if d.m.Gateway.Enabled() {
		if err := d.agentGateway(a, t, triggers); err != nil {
			return err
		}
	}
	td, err := d.define(t)
	if err != nil {
		return err
	}
	// After the bus: an agent started before it would only retry (its
	// health does not depend on the bus), but the rollout is in order.
	_, err = d.serve(t, td, d.sg.agents.ID(), triggers, nil, []pulumi.Resource{d.bus}, false)
	return err
}
