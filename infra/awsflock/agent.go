package awsflock

import (
	"fmt"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
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
	if err := d.logAlarm(a.ID, lg); err != nil {
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
		// PID 1 is the agent's own init: nothing of the agent's can take
		// the container's output from it, and the output is bounded.
		command: AgentCommand(d.args.LogRateKiB), ownInit: true,
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

// LogAlarmPeriod is the window of an agent's log alarm, in seconds.
const LogAlarmPeriod = 300

// LogAlarmBytes is the alarm's threshold: half of what the bound lets
// through in LogAlarmPeriod, so an agent writing at its bound for five
// minutes pages the operator (a burst alone does not).
func LogAlarmBytes(rateKiB int) float64 {
	if rateKiB <= 0 {
		rateKiB = DefaultLogRateKiB
	}
	return float64(rateKiB<<10) * LogAlarmPeriod / 2
}

// logAlarm: CloudWatch Logs takes whatever the bound lets through and
// bills every byte; an agent at its bound (a flood held back) is worth a
// page. IncomingBytes is the log group's uncompressed bytes ingested.
func (d *declarer) logAlarm(id string, lg *cloudwatch.LogGroup) error {
	var actions pulumi.Array
	for _, arn := range d.args.AlarmActions {
		actions = append(actions, pulumi.String(arn))
	}
	threshold := LogAlarmBytes(d.args.LogRateKiB)
	_, err := cloudwatch.NewMetricAlarm(d.ctx, d.n(id, "log-rate"), &cloudwatch.MetricAlarmArgs{
		AlarmDescription: pulumi.Sprintf("Agent %s wrote more than %.0f KiB to CloudWatch Logs in %d minutes, half of what its bound lets through (flock:aws.logRateKiB): something in its task is flooding its log; the log's own notes count what the bound held back",
			id, threshold/1024, LogAlarmPeriod/60),
		Namespace:          pulumi.String("AWS/Logs"),
		MetricName:         pulumi.String("IncomingBytes"),
		Dimensions:         pulumi.StringMap{"LogGroupName": lg.Name},
		Statistic:          pulumi.String("Sum"),
		Period:             pulumi.Int(LogAlarmPeriod),
		EvaluationPeriods:  pulumi.Int(1),
		ComparisonOperator: pulumi.String("GreaterThanThreshold"),
		Threshold:          pulumi.Float64(threshold),
		TreatMissingData:   pulumi.String("notBreaching"), // a quiet log sends no data points
		AlarmActions:       actions,
		OkActions:          actions,
		Tags:               d.tags("agent", id),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("agent %s log alarm: %w", id, err)
	}
	return nil
}
