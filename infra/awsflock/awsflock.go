// Package awsflock declares the flock on AWS: ECS Fargate tasks in private
// subnets, one EFS access point per agent directory and log, the bus (one
// node, or a three-node cluster) found through Cloud Map DNS, credentials in Secrets Manager, logs in CloudWatch,
// images in ECR. It renders the same flock model as the dev component and
// holds the same isolation invariants (README: security model).
package awsflock

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecr"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/servicediscovery"
	"github.com/pulumi/pulumi-docker/sdk/v4/go/docker"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Egress is how tasks reach the AWS APIs they need (ECR, CloudWatch Logs,
// Secrets Manager) from subnets without public IPs.
type Egress string

const (
	// EgressEndpoints: VPC interface endpoints (and the S3 gateway endpoint
	// for image layers). No route to the internet exists. The default.
	EgressEndpoints Egress = "endpoints"
	// EgressNAT: a NAT gateway. Tasks' security groups must then allow 443 to
	// anywhere, so agents can reach the internet on 443.
	EgressNAT Egress = "nat"
)

// NobodyUID is the identity agents read common with (through its read-only
// access point): they see what is world-readable and own nothing there.
const NobodyUID = 65534

// OperatorUID is the operator task's UID, the owner of common: the slot
// below the bus's (flock:uidBase - 1), so no agent or the bus shares it.
func OperatorUID(m flock.Model) int { return m.Bus.UID - 1 }

// Defaults of flock:aws.
var (
	DefaultCIDR             = netip.MustParsePrefix("10.220.0.0/16")
	DefaultAZCount          = 2
	DefaultLogRetentionDays = 30
	// DefaultLogRateKiB and MaxLogRateKiB bound flock:aws.logRateKiB.
	DefaultLogRateKiB = 16
	MaxLogRateKiB     = 1024
)

// LogBurstFactor is how many seconds of an agent's log rate may come at once.
const LogBurstFactor = 16

// AgentCommand is an agent task's command (after the image's entrypoint,
// /flock-agent): its own init (agent/pid1), holding the runtime's output
// to rateKiB a second on its way to CloudWatch Logs.
func AgentCommand(rateKiB int) []string {
	if rateKiB <= 0 {
		rateKiB = DefaultLogRateKiB
	}
	return []string{"init", "--rate", strconv.Itoa(rateKiB << 10), "--burst", strconv.Itoa(LogBurstFactor * rateKiB << 10), "--", "/flock-agent", "run"}
}

// Paths inside the tasks.
const (
	ScratchTmp = "/tmp"
	ScratchRun = "/run"
)

// Network says where the tasks run.
type Network struct {
	VpcID         string   // "" creates a VPC
	SubnetIDs     []string // with VpcID: private subnets, one per availability zone
	RouteTableIDs []string // with VpcID and EgressEndpoints: the route tables of SubnetIDs (S3 gateway endpoint)
	CIDR          netip.Prefix
	AZCount       int
	Egress        Egress
}

// Args configure the aws flock.
type Args struct {
	Model   flock.Model
	Network Network
	// LogRetentionDays is the retention of every log group.
	LogRetentionDays int
	// Namespace is the Cloud Map private DNS namespace; the bus is
	// bus.<Namespace>, or each node of a clustered bus bus-<n>.<Namespace>.
	Namespace string
	// OperatorCIDRs may reach the bus's client port (e.g. a VPN's range). Empty by default.
	OperatorCIDRs []string
	// CreateServiceLinkedRole declares ECS's service-linked role, which
	// every ECS service then depends on (flock:aws.createServiceLinkedRole).
	CreateServiceLinkedRole bool
	// StorageAlarmBytes is the file system size past which its alarm fires;
	// AlarmActions the SNS topics it notifies (none: the console shows it).
	StorageAlarmBytes int64
	AlarmActions      []string
	// LogRateKiB bounds each agent's output to CloudWatch Logs (KiB a second).
	LogRateKiB int
	// Metrics is what the services write as CloudWatch metrics
	// (protocol.EMFOff, EMFFlock or EMFAgents); the dashboard comes with
	// any but off.
	Metrics string
	// AgentContext is the docker build context (agent/Dockerfile and prebuilt binaries).
	AgentContext string
	// BaseImage overrides the Dockerfile's BASE build argument.
	BaseImage string
	// ImageTag tags the stock images (prefixed agent-, bus-, gateway-);
	// ImageTag (the function) derives one.
	ImageTag string
	// CPUArchitecture is every task's (runtimePlatform) and what every
	// image is built for.
	CPUArchitecture CPUArchitecture
	// OwnImages tag the agents' own images (Model.Agents[].Image), one per
	// distinct image (flock.Image.Key); Config.Validate derives them
	// (TagOwnImage). Nil when every agent runs the stock image.
	OwnImages map[string]OwnImageTags
	// Rendered: the bus nodes' configs and the seeds and keys (agents',
	// gateway's, upstreams', services').
	flock.Rendered
	// OperatorSeed is the operator's NATS nkey seed (the operator task's).
	OperatorSeed string
	// With a model gateway: its rendered config (GatewayConfig: token
	// hashes, no key) and each agent's gateway token (agent ID -> token).
	GatewayConfig []byte
	GatewayTokens map[string]string
}

// ECSFlock is the ECS flock component (type token flock:aws:Flock).
type ECSFlock struct {
	pulumi.ResourceState

	BusURL                  pulumi.StringOutput      `pulumi:"busUrl"`
	MonitorURL              pulumi.StringOutput      `pulumi:"monitorUrl"`
	ClusterName             pulumi.StringOutput      `pulumi:"clusterName"`
	RepositoryURL           pulumi.StringOutput      `pulumi:"repositoryUrl"`
	FileSystemID            pulumi.StringOutput      `pulumi:"fileSystemId"`
	OperatorTaskDefinition  pulumi.StringOutput      `pulumi:"operatorTaskDefinition"`
	OperatorSecurityGroupID pulumi.StringOutput      `pulumi:"operatorSecurityGroupId"`
	SubnetIDs               pulumi.StringArrayOutput `pulumi:"subnetIds"`
}

// New declares the aws flock.
func New(ctx *pulumi.Context, name string, args Args, opts ...pulumi.ResourceOption) (*ECSFlock, error) {
	if err := args.check(); err != nil {
		return nil, err
	}
	f := &ECSFlock{}
	if err := ctx.RegisterComponentResource("flock:aws:Flock", name, f, opts...); err != nil {
		return nil, err
	}
	p := pulumi.Parent(f)
	d := &declarer{ctx: ctx, name: name, args: args, m: args.Model, parent: p, invoke: p}
	if err := d.declare(); err != nil {
		return nil, err
	}
	f.BusURL = pulumi.String(BusURL(args.Model, args.Namespace)).ToStringOutput()
	f.MonitorURL = pulumi.String(MonitorURL(args.Model, args.Namespace)).ToStringOutput()
	f.ClusterName = d.cluster.Name
	f.RepositoryURL = d.repo.RepositoryUrl
	f.FileSystemID = d.fs.ID().ToStringOutput()
	f.OperatorTaskDefinition = d.operatorTask.Family
	f.OperatorSecurityGroupID = d.sg.operator.ID().ToStringOutput()
	f.SubnetIDs = d.subnets.ToStringArrayOutput()
	return f, ctx.RegisterResourceOutputs(f, pulumi.Map{
		"busUrl": f.BusURL, "monitorUrl": f.MonitorURL, "clusterName": f.ClusterName,
		"repositoryUrl": f.RepositoryURL, "fileSystemId": f.FileSystemID,
		"operatorTaskDefinition": f.OperatorTaskDefinition, "operatorSecurityGroupId": f.OperatorSecurityGroupID,
		"subnetIds": f.SubnetIDs,
	})
}

// check refuses Args a stack could not have built from a valid config (the
// caller names the component in the error).
func (a Args) check() error {
	if a.Namespace == "" || a.ImageTag == "" || a.AgentContext == "" || a.LogRetentionDays <= 0 {
		return fmt.Errorf("Namespace, ImageTag, AgentContext and LogRetentionDays are required")
	}
	if a.CPUArchitecture != X86_64 && a.CPUArchitecture != ARM64 {
		return fmt.Errorf("CPUArchitecture must be %s or %s (got %q)", X86_64, ARM64, a.CPUArchitecture)
	}
	for _, ag := range a.Model.Agents {
		if a.Seeds[ag.ID] == "" {
			return fmt.Errorf("agent %s: no credentials", ag.ID)
		}
	}
	if a.OperatorSeed == "" {
		return fmt.Errorf("no operator credentials")
	}
	if a.ServicesSeed == "" {
		return fmt.Errorf("no credentials for the flock's services")
	}
	own := ownImages(a.Model)
	if len(own) > MaxOwnImages {
		return fmt.Errorf("%d distinct agent images, at most %d", len(own), MaxOwnImages)
	}
	for _, img := range own {
		if t := a.OwnImages[img.Key()]; t.Agent == "" || (img.Dockerfile != "") != (t.Base != "") {
			return fmt.Errorf("%s: no tags for its image (Config.Validate derives them)", img.ConfigKey)
		}
	}
	if len(a.BusConfigs) != len(a.Model.Bus.BusNodes()) {
		return fmt.Errorf("%d bus configs for %d bus nodes", len(a.BusConfigs), len(a.Model.Bus.BusNodes()))
	}
	if _, err := BusStorageGiB(a.Model); a.Model.Bus.Clustered() && err != nil {
		return err
	}
	return a.checkGateway()
}

type securityGroups struct {
	agents, bus, efs, endpoints, operator *ec2.SecurityGroup
	services                              *ec2.SecurityGroup // the flock's services: no ingress
	gateway                               *ec2.SecurityGroup // with a model gateway
}

type declarer struct {
	ctx    *pulumi.Context
	name   string
	args   Args
	m      flock.Model
	parent pulumi.ResourceOption
	invoke pulumi.InvokeOption // the same parent, for provider functions

	partition, region, account string
	dnsSuffix                  string // the partition's: amazonaws.com

	vpcID       pulumi.StringOutput
	subnets     pulumi.StringArray
	routeTables pulumi.StringArray
	sg          securityGroups
	// ready are what every task needs before it can start: routes or
	// endpoints to AWS, EFS mount targets, the file system policy, and
	// ECS's service-linked role when the stack declares it.
	ready []pulumi.Resource

	fs               *efs.FileSystem
	commonAP, busAP  *efs.AccessPoint
	commonWriterAP   *efs.AccessPoint
	repo             *ecr.Repository
	registryAuth     ecr.GetAuthorizationTokenResultOutput
	agentImg, busImg *docker.Image
	cluster          *ecs.Cluster
	namespace        *servicediscovery.PrivateDnsNamespace
	operatorTask     *ecs.TaskDefinition

	// With a model gateway: its image, the subnets with its route out, and
	// that route (its service waits for it).
	gatewayImg     *docker.Image
	gatewaySubnets pulumi.StringArray
	gatewayRoute   pulumi.Resource

	// ownImgs are the agents' own images, by flock.Image.Key.
	ownImgs map[string]*docker.Image

	// bus is the bus's last node's service: agents and the gateway start
	// once it is steady.
	bus pulumi.Resource
}

// n names a child from the component's name (names.go).
func (d *declarer) n(parts ...string) string { return resourceName(d.name, parts...) }

func (d *declarer) tags(role, agent string) pulumi.StringMap {
	t := pulumi.StringMap{protocol.LabelFlock: pulumi.String(d.name), protocol.LabelRole: pulumi.String(role)}
	if agent != "" {
		t[protocol.LabelAgent] = pulumi.String(agent)
	}
	return t
}

func (d *declarer) declare() error {
	// The account, region and partition go into trust policies, log
	// configuration and endpoint service names.
	id, err := aws.GetCallerIdentity(d.ctx, nil, d.invoke)
	if err != nil {
		return fmt.Errorf("caller identity: %w", err)
	}
	region, err := aws.GetRegion(d.ctx, nil, d.invoke)
	if err != nil {
		return fmt.Errorf("region: %w", err)
	}
	part, err := aws.GetPartition(d.ctx, nil, d.invoke)
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	d.account, d.region, d.partition, d.dnsSuffix = id.AccountId, region.Name, part.Partition, part.DnsSuffix

	if err := d.network(part.ReverseDnsPrefix); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := d.storage(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := d.dnsFirewall(); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := d.repository(); err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if d.agentImg, err = d.image("agent"); err != nil {
		return fmt.Errorf("agent image: %w", err)
	}
	if d.busImg, err = d.image("bus"); err != nil {
		return fmt.Errorf("bus image: %w", err)
	}
	if d.m.Gateway.Enabled() {
		if d.gatewayImg, err = d.image("gateway"); err != nil {
			return fmt.Errorf("gateway image: %w", err)
		}
	}
	// Agents' own images: one per distinct spec, shared by the agents that name it.
	d.ownImgs = map[string]*docker.Image{}
	for _, img := range ownImages(d.m) {
		if d.ownImgs[img.Key()], err = d.ownImage(img); err != nil {
			return fmt.Errorf("agent image %s (%s): %w", img.Key(), img.ConfigKey, err)
		}
	}
	if err := d.platform(); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := d.declareBus(); err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	if err := d.declareOperator(); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	if err := d.declareServices(); err != nil {
		return fmt.Errorf("services: %w", err)
	}
	if err := d.dashboard(); err != nil {
		return err
	}
	return d.m.DeclareMembers(d.declareGateway, d.declareAgent)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
