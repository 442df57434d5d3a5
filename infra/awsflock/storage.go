package awsflock

import (
	"fmt"
	"path"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// The layout of the file system. Nobody mounts its root (the file system
// policy forbids mounts without an access point): each task sees only the
// directories its access points open.
//
//	/agents/<id>     an agent's private directory: its access point, its UID, 0700
//	/logs/<id>       an agent's log directory, holding <id>.log: same
//	/common          read-only for agents (read-write for the operator task)
//	/bus             the bus's JetStream store (a single bus; cluster nodes
//	                 keep theirs on their own task storage)
func EFSAgentDir(id string) string { return path.Join("/agents", id) }

// EFSLogDir is the EFS directory of an agent's log (mounted at /shared/logs).
func EFSLogDir(id string) string { return path.Join("/logs", id) }

// EFS directories of common and the bus store.
const (
	EFSCommonDir = "/common"
	EFSBusDir    = "/bus"
)

// ContainerLogDir is where an agent's log access point is mounted: the
// agent writes protocol.ContainerLogFile(id) = /shared/logs/<id>.log inside it.
const ContainerLogDir = protocol.ContainerSharedDir + "/logs"

func (d *declarer) storage() error {
	var err error
	d.fs, err = efs.NewFileSystem(d.ctx, d.n("efs"), &efs.FileSystemArgs{
		Encrypted:       pulumi.Bool(true), // at rest, with the aws/elasticfilesystem key
		PerformanceMode: pulumi.String("generalPurpose"),
		// Elastic: pay for what is read and written; small flocks never
		// exhaust burst credits or pay for idle provisioned throughput.
		ThroughputMode: pulumi.String("elastic"),
		Tags:           d.tags("storage", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("file system: %w", err)
	}
	if err := d.storageAlarm(); err != nil {
		return err
	}
	for i, sub := range d.subnets {
		mt, err := efs.NewMountTarget(d.ctx, d.n("efs-mount", strconv.Itoa(i+1)), &efs.MountTargetArgs{
			FileSystemId: d.fs.ID(), SubnetId: sub,
			SecurityGroups: pulumi.StringArray{d.sg.efs.ID()},
		}, d.parent)
		if err != nil {
			return fmt.Errorf("mount target %d: %w", i+1, err)
		}
		d.ready = append(d.ready, mt)
	}
	policy, err := efs.NewFileSystemPolicy(d.ctx, d.n("efs-policy"), &efs.FileSystemPolicyArgs{
		FileSystemId: d.fs.ID(),
		Policy:       d.fs.Arn.ApplyT(FileSystemPolicy).(pulumi.StringOutput),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("file system policy: %w", err)
	}
	d.ready = append(d.ready, policy)

	// common: owned by the operator, world-readable. Agents mount it through
	// an access point that makes them "nobody" (read-only mount, no
	// ClientWrite); the operator task alone writes through its own.
	op := OperatorUID(d.m)
	if d.commonAP, err = d.accessPoint("common-ap", "common", "", EFSCommonDir, op, op, "0755", NobodyUID); err != nil {
		return err
	}
	if d.commonWriterAP, err = d.accessPoint("common-writer-ap", "operator", "", EFSCommonDir, op, op, "0755", op); err != nil {
		return err
	}
	if d.m.Bus.Clustered() {
		return nil // no bus store on EFS
	}
	if d.busAP, err = d.accessPoint("bus-ap", "bus", "", EFSBusDir, d.m.Bus.UID, d.m.Bus.UID, "0700", d.m.Bus.UID); err != nil {
		return err
	}
	return nil
}

// accessPoint opens dir to one identity: created (if missing) with owner
// uid:gid and perms, every request through it made as user:user whatever
// the client claims.
func (d *declarer) accessPoint(name, role, agent, dir string, uid, gid int, perms string, user int) (*efs.AccessPoint, error) {
	args := &efs.AccessPointArgs{
		FileSystemId: d.fs.ID(),
		RootDirectory: efs.AccessPointRootDirectoryArgs{
			Path: pulumi.String(dir),
			CreationInfo: efs.AccessPointRootDirectoryCreationInfoArgs{
				OwnerUid: pulumi.Int(uid), OwnerGid: pulumi.Int(gid), Permissions: pulumi.String(perms),
			},
		},
		PosixUser: efs.AccessPointPosixUserArgs{Uid: pulumi.Int(user), Gid: pulumi.Int(user)},
		Tags:      d.tags(role, agent),
	}
	ap, err := efs.NewAccessPoint(d.ctx, d.n(name), args, d.parent)
	if err != nil {
		return nil, fmt.Errorf("access point %s: %w", name, err)
	}
	return ap, nil
}

// DefaultStorageAlarmBytes is where the file system's size alarm fires when
// flock:aws.storageAlarmGiB is not set: every agent's diskMiB (a quota on
// the docker target, a planning figure here) and 1 GiB for common, the logs
// and a single bus's store.
func DefaultStorageAlarmBytes(m flock.Model) int64 {
	total := int64(1) << 30
	for _, a := range m.Agents {
		total += int64(a.Limits.DiskMiB) << 20
	}
	return total
}

// storageAlarm is the bound EFS does not have: an alarm on the file
// system's size. It cannot stop a write (EFS takes hundreds of MB/s, and
// its size is reported every 15 minutes); it makes a full file system a
// page to the operator rather than a bill.
func (d *declarer) storageAlarm() error {
	var actions pulumi.Array
	for _, arn := range d.args.AlarmActions {
		actions = append(actions, pulumi.String(arn))
	}
	gib := float64(d.args.StorageAlarmBytes) / (1 << 30)
	_, err := cloudwatch.NewMetricAlarm(d.ctx, d.n("efs-size"), &cloudwatch.MetricAlarmArgs{
		AlarmDescription: pulumi.Sprintf("The flock's EFS file system holds more than %.1f GiB (flock:aws.storageAlarmGiB): EFS has no quota per agent, so an agent may be filling it", gib),
		// StorageBytes is published every 15 minutes; Total is every class.
		Namespace:          pulumi.String("AWS/EFS"),
		MetricName:         pulumi.String("StorageBytes"),
		Dimensions:         pulumi.StringMap{"FileSystemId": d.fs.ID().ToStringOutput(), "StorageClass": pulumi.String("Total")},
		Statistic:          pulumi.String("Maximum"),
		Period:             pulumi.Int(900),
		EvaluationPeriods:  pulumi.Int(1),
		ComparisonOperator: pulumi.String("GreaterThanThreshold"),
		Threshold:          pulumi.Float64(float64(d.args.StorageAlarmBytes)),
		TreatMissingData:   pulumi.String("missing"),
		AlarmActions:       actions,
		OkActions:          actions,
		Tags:               d.tags("storage", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("file system size alarm: %w", err)
	}
	return nil
}
