package awsflock

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// Config is flock:aws, the aws target's settings, before validation.
type Config struct {
	VpcID             string   `json:"vpcId"`
	SubnetIDs         []string `json:"subnetIds"`
	RouteTableIDs     []string `json:"routeTableIds"`
	CIDR              string   `json:"cidr"`
	AvailabilityZones *int     `json:"availabilityZones"`
	Egress            string   `json:"egress"`
	LogRetentionDays  *int     `json:"logRetentionDays"`
	Namespace         string   `json:"namespace"`
	OperatorCIDRs     []string `json:"operatorCidrs"`
	AgentContext      string   `json:"agentContext"`
	BaseImage         string   `json:"baseImage"`
	ImageTag          string   `json:"imageTag"`
	CPUArchitecture   string   `json:"cpuArchitecture"`
	// CreateServiceLinkedRole declares ECS's service-linked role
	// (AWSServiceRoleForECS): a fresh account has none until something
	// creates it, and the first ECS service can fail without it. Off by
	// default: declaring it fails on an account that already has it.
	CreateServiceLinkedRole bool `json:"createServiceLinkedRole"`
	// StorageAlarmGiB is the size of the file system past which its alarm
	// fires (EFS has no quota: this is the bound the operator hears of).
	StorageAlarmGiB *int `json:"storageAlarmGiB"`
	// LogRateKiB bounds what each agent's task writes to CloudWatch Logs:
	// KiB a second on average, bursts of 16 times that (agent/logbound).
	LogRateKiB *int `json:"logRateKiB"`
	// AlarmActions are the SNS topics the alarm notifies.
	AlarmActions []string `json:"alarmActions"`
	// Metrics is what the services write to CloudWatch (embedded metric
	// format in their log) and whether the stack declares a dashboard:
	// off, flock (the default) or agents.
	Metrics string `json:"metrics"`
}

// Key is the aws target's own configuration key.
const Key = "flock:aws"

// ConfigShape is what Key holds, for the error when it is not even that.
const ConfigShape = "an object {vpcId, subnetIds, routeTableIds, cidr, availabilityZones, egress, logRetentionDays, namespace, operatorCidrs, agentContext, baseImage, imageTag, cpuArchitecture, createServiceLinkedRole, storageAlarmGiB, logRateKiB, alarmActions, metrics}"

var (
	vpcIDPattern    = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	subnetIDPattern = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	rtbIDPattern    = regexp.MustCompile(`^rtb-[0-9a-f]{8,17}$`)
	dnsPattern      = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)
	tagPattern      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,100}$`)
	// An SNS topic's ARN: CloudWatch alarm actions accept it (PutMetricAlarm,
	// AlarmActions; topic names are 1-256 of [A-Za-z0-9_-], .fifo allowed).
	snsTopicPattern = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)
	// CloudWatch Logs accepts only these retention periods.
	logRetentions = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)

// Validate turns flock:aws into the component's arguments (all but the
// credentials and the rendered bus files), with every problem, each naming
// its key and the rule it breaks, for the stack to report with the model's:
// errors.Join of *flock.Error (flock.Problems lists them).
//
// With an invalid model (modelValid false; its own errors are reported) only
// flock:aws itself is checked: rules that weigh it against the model would
// report the empty model's values, not the user's.
//
// stack is the stack's name (ctx.Stack()): it is part of the log group names
// and task definition families, which are checked against AWS's rules with
// every other name the component derives from the configuration (names.go).
func (c Config) Validate(stack string, m flock.Model, modelValid bool) (Args, error) {
	var errs []error
	add := func(key, format string, v ...any) {
		errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf(format, v...)})
	}
	k := func(field string) string { return Key + "." + field }
	a := Args{
		Model:            m,
		LogRetentionDays: DefaultLogRetentionDays,
		Namespace:        m.Name + ".flock.internal",
		AgentContext:     "agent",
		BaseImage:        c.BaseImage,
		ImageTag:         c.ImageTag,
		CPUArchitecture:  DefaultCPUArchitecture,
		// Declared or not as asked: AWS alone knows whether the account has it.
		CreateServiceLinkedRole: c.CreateServiceLinkedRole,
		Network: Network{
			CIDR: DefaultCIDR, AZCount: DefaultAZCount, Egress: EgressEndpoints,
		},
	}
	if modelValid && OperatorUID(m) < 1000 {
		add("flock:uidBase", "must be at least 1001 on the aws target: the operator task runs as flock:uidBase - 1, which must not be a system UID (got %d)", m.Bus.UID)
	}
	if m.Runtime != "" {
		add("flock:runtime", "must be empty on the aws target: Fargate runs every task in its own microVM and chooses the runtime (got %q)", m.Runtime)
	}

	c.validateNetwork(&a.Network, m, modelValid, add)
	c.validateGateway(a.Network, m, add)

	if c.LogRetentionDays != nil {
		ok := false
		for _, d := range logRetentions {
			ok = ok || d == *c.LogRetentionDays
		}
		if ok {
			a.LogRetentionDays = *c.LogRetentionDays
		} else {
			add(k("logRetentionDays"), "must be one of CloudWatch's retention periods %v (got %d)", logRetentions, *c.LogRetentionDays)
		}
	}
	if c.Namespace != "" {
		if !dnsPattern.MatchString(c.Namespace) || len(c.Namespace) > 200 {
			add(k("namespace"), "must be a lower-case DNS name with at least two labels such as %s.flock.internal (got %q)", m.Name, c.Namespace)
		} else {
			a.Namespace = c.Namespace
		}
	}
	for i, s := range c.OperatorCIDRs {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil || !p.Addr().Is4():
			add(fmt.Sprintf("%s[%d]", k("operatorCidrs"), i), "must be an IPv4 CIDR (got %q)", s)
		case !p.Addr().IsPrivate() || p.Bits() < 8:
			add(fmt.Sprintf("%s[%d]", k("operatorCidrs"), i), "must be a private range of at most /8 (a VPN or peered network): the bus is never open to the internet (got %q)", s)
		case p.Masked() != p:
			add(fmt.Sprintf("%s[%d]", k("operatorCidrs"), i), "must be a network address: %s, not %s", p.Masked(), p)
		default:
			a.OperatorCIDRs = append(a.OperatorCIDRs, s)
		}
	}
	if c.AgentContext != "" {
		a.AgentContext = c.AgentContext
	}
	a.StorageAlarmBytes = DefaultStorageAlarmBytes(m)
	if c.StorageAlarmGiB != nil {
		if g := *c.StorageAlarmGiB; g < 1 || g > 8<<20 {
			add(k("storageAlarmGiB"), "must be 1 to %d GiB, the file system size past which its alarm fires (got %d)", 8<<20, g)
		} else {
			a.StorageAlarmBytes = int64(g) << 30
		}
	}
	a.LogRateKiB = DefaultLogRateKiB
	if c.LogRateKiB != nil {
		if r := *c.LogRateKiB; r < 1 || r > MaxLogRateKiB {
			add(k("logRateKiB"), "must be 1 to %d KiB a second, what each agent's task may write to CloudWatch Logs (got %d)", MaxLogRateKiB, r)
		} else {
			a.LogRateKiB = r
		}
	}
	for i, arn := range c.AlarmActions {
		if !snsTopicPattern.MatchString(arn) {
			add(fmt.Sprintf("%s[%d]", k("alarmActions"), i), "must be an SNS topic's ARN such as arn:aws:sns:eu-west-1:123456789012:flock-alarms (got %q)", arn)
		}
	}
	if len(c.AlarmActions) > 5 {
		add(k("alarmActions"), "may list at most 5 actions, CloudWatch's limit per alarm state (got %d)", len(c.AlarmActions))
	}
	a.AlarmActions = c.AlarmActions
	switch c.Metrics {
	case "":
		a.Metrics = protocol.EMFFlock
	case protocol.EMFOff, protocol.EMFFlock, protocol.EMFAgents:
		a.Metrics = c.Metrics
	default:
		add(k("metrics"), "must be %q (no CloudWatch metrics, no dashboard), %q (the flock's figures and a dashboard) or %q (every agent's figures too) (got %q)", protocol.EMFOff, protocol.EMFFlock, protocol.EMFAgents, c.Metrics)
	}
	switch arch := CPUArchitecture(c.CPUArchitecture); arch {
	case "":
	case X86_64, ARM64:
		a.CPUArchitecture = arch
	default:
		add(k("cpuArchitecture"), "must be %q or %q, the CPU architectures Fargate runs Linux tasks on (got %q)", X86_64, ARM64, c.CPUArchitecture)
	}
	if missing := binaryErrors(a.AgentContext, a.CPUArchitecture); len(missing) > 0 {
		add(k("cpuArchitecture"), "is %s, and the images' binaries for it are not built (%s missing): run `make bin ARCHS=%s` first, or every image build would fail midway through the deploy", a.CPUArchitecture, strings.Join(missing, ", "), a.CPUArchitecture.GOARCH())
	}
	if c.ImageTag != "" && !tagPattern.MatchString(c.ImageTag) {
		add(k("imageTag"), "must be a docker tag (letters, digits, _ . -; at most 101 characters) (got %q)", c.ImageTag)
	}
	for _, ag := range m.Agents {
		if _, err := SizeFor(ag.Limits); err != nil {
			add("flock:limits", "agent %s: %v", ag.ID, err)
		}
	}
	if _, err := SizeFor(m.Bus.Limits); modelValid && err != nil {
		add("flock:bus.limits", "%v", err)
	}
	if _, err := SizeFor(m.Services.Limits); modelValid && err != nil {
		add("flock:services.limits", "%v", err)
	}
	if _, err := BusStorageGiB(m); modelValid && m.Bus.Clustered() && err != nil {
		errs = append(errs, err)
	}
	// An agent's own Dockerfile is built where the program runs: it must be there.
	errs = append(errs, flock.ImageFileErrors(m.Agents, os.Stat)...)
	if modelValid {
		// Names last: they read the namespace settled above.
		errs = append(errs, nameErrors(stack, a, c.Namespace != "" && a.Namespace == c.Namespace)...)
	}
	if own := ownImages(m); len(own) > MaxOwnImages {
		add(own[MaxOwnImages].ConfigKey, "would be the flock's agent image number %d: the aws target builds at most %d distinct agent images (each has a lifecycle rule of its own in the repository, whose policy holds at most 30,720 characters); let agents share images", MaxOwnImages+1, MaxOwnImages)
	}
	if len(errs) > 0 {
		return Args{}, errors.Join(errs...)
	}
	if a.ImageTag == "" {
		var err error
		if a.ImageTag, err = ImageTag(a.AgentContext, a.BaseImage, a.CPUArchitecture); err != nil {
			return Args{}, &flock.Error{Key: k("imageTag"), Rule: err.Error()}
		}
	}
	for _, img := range ownImages(m) {
		tags, err := TagOwnImage(img, a.ImageTag)
		if err != nil {
			return Args{}, &flock.Error{Key: img.ConfigKey, Rule: err.Error()}
		}
		if a.OwnImages == nil {
			a.OwnImages = map[string]OwnImageTags{}
		}
		a.OwnImages[img.Key()] = tags
	}
	return a, nil
}

// validateNetwork checks where the tasks run: an existing VPC and its
// subnets, or the VPC the stack creates; and how they reach AWS.
func (c Config) validateNetwork(n *Network, m flock.Model, modelValid bool, add func(key, format string, v ...any)) {
	k := func(field string) string { return Key + "." + field }
	switch Egress(c.Egress) {
	case "":
	case EgressEndpoints, EgressNAT:
		n.Egress = Egress(c.Egress)
	default:
		add(k("egress"), "must be %q (VPC endpoints, no route to the internet) or %q (a NAT gateway) (got %q)", EgressEndpoints, EgressNAT, c.Egress)
	}
	if c.VpcID != "" {
		if !vpcIDPattern.MatchString(c.VpcID) {
			add(k("vpcId"), "must be a VPC ID such as vpc-0123456789abcdef0 (got %q)", c.VpcID)
		}
		n.VpcID = c.VpcID
		if len(c.SubnetIDs) < 2 {
			add(k("subnetIds"), "must list at least two private subnets of %s, in different availability zones (got %d)", c.VpcID, len(c.SubnetIDs))
		}
		seen := map[string]bool{}
		for i, s := range c.SubnetIDs {
			if !subnetIDPattern.MatchString(s) {
				add(fmt.Sprintf("%s[%d]", k("subnetIds"), i), "must be a subnet ID such as subnet-0123456789abcdef0 (got %q)", s)
			} else if seen[s] {
				add(fmt.Sprintf("%s[%d]", k("subnetIds"), i), "duplicates %s", s)
			}
			seen[s] = true
		}
		n.SubnetIDs = c.SubnetIDs
		if n.Egress == EgressEndpoints && len(c.RouteTableIDs) == 0 {
			add(k("routeTableIds"), "is required with %s and egress %q: the S3 gateway endpoint (image layers) is added to these route tables", k("vpcId"), EgressEndpoints)
		}
		for i, r := range c.RouteTableIDs {
			if !rtbIDPattern.MatchString(r) {
				add(fmt.Sprintf("%s[%d]", k("routeTableIds"), i), "must be a route table ID such as rtb-0123456789abcdef0 (got %q)", r)
			}
		}
		n.RouteTableIDs = c.RouteTableIDs
		if c.CIDR != "" || c.AvailabilityZones != nil {
			add(k("cidr"), "cidr and availabilityZones shape the VPC the stack creates: leave them unset with %s", k("vpcId"))
		}
		if n.Egress == EgressNAT && len(c.RouteTableIDs) > 0 {
			add(k("routeTableIds"), "is only used with egress %q; with %q the subnets' own routes must reach a NAT gateway", EgressEndpoints, EgressNAT)
		}
	} else {
		if len(c.SubnetIDs) > 0 || len(c.RouteTableIDs) > 0 {
			add(k("subnetIds"), "subnetIds and routeTableIds name parts of an existing VPC: set %s too, or leave them unset to create a VPC", k("vpcId"))
		}
		if c.AvailabilityZones != nil {
			if v := *c.AvailabilityZones; v < 2 || v > 6 {
				add(k("availabilityZones"), "must be between 2 and 6 (got %d)", v)
			} else {
				n.AZCount = v
			}
		}
		if c.CIDR != "" {
			p, err := netip.ParsePrefix(c.CIDR)
			switch {
			case err != nil || !p.Addr().Is4():
				add(k("cidr"), "must be an IPv4 CIDR such as %s (got %q)", DefaultCIDR, c.CIDR)
			case !p.Addr().IsPrivate():
				add(k("cidr"), "must be a private range (RFC 1918) (got %q)", c.CIDR)
			case p.Masked() != p:
				add(k("cidr"), "must be a network address: %s, not %s", p.Masked(), p)
			case p.Bits() < 16 || p.Bits() > 22:
				add(k("cidr"), "must be between /16 and /22: it splits into 16 subnets (got /%d)", p.Bits())
			default:
				n.CIDR = p
			}
		}
		if need := len(m.Agents) + len(m.Bus.BusNodes()) + 2; modelValid && PrivateCapacity(n.CIDR, n.AZCount) < need {
			bus := "the bus"
			if m.Bus.Clustered() {
				bus = fmt.Sprintf("%d bus nodes", len(m.Bus.BusNodes()))
			}
			add(k("cidr"), "%s in %d zones holds %d task addresses; %d agents, %s, the services and the operator need %d: use a larger range or more zones", n.CIDR, n.AZCount, PrivateCapacity(n.CIDR, n.AZCount), len(m.Agents), bus, need)
		}
	}
}

// ConfigKeys are the aws target's keys, for the configuration reference.
func ConfigKeys() []flock.ConfigKey {
	k := func(field, typ, def, rule, desc string) flock.ConfigKey {
		return flock.ConfigKey{Key: Key + "." + field, Type: typ, Default: def, Rule: rule, Targets: flock.AWSOnly, Description: desc}
	}
	return []flock.ConfigKey{
		k("cidr", "IPv4 CIDR", DefaultCIDR.String(), "a private network address of /16 to /22, large enough for every task; unset with vpcId", "range of the VPC the stack creates"),
		k("availabilityZones", "integer", fmt.Sprint(DefaultAZCount), "2 to 6; unset with vpcId", "zones of the VPC the stack creates: the first this many the region has where Fargate runs tasks (by zone ID, docs/aws.md)"),
		k("egress", "string", string(EgressEndpoints), fmt.Sprintf("%q (VPC endpoints, no route out) or %q (a NAT gateway)", EgressEndpoints, EgressNAT), "how tasks reach the AWS APIs"),
		k("vpcId", "string", "(a new VPC)", "a VPC ID such as vpc-0123456789abcdef0; no model gateway with it", "an existing VPC to run in"),
		k("subnetIds", "list of strings", "", "with vpcId: at least two private subnets, in different zones", "the existing VPC's subnets"),
		k("routeTableIds", "list of strings", "", "with vpcId and egress endpoints: the subnets' route tables", "where the S3 gateway endpoint is added"),
		k("logRetentionDays", "integer", fmt.Sprint(DefaultLogRetentionDays), fmt.Sprintf("one of CloudWatch's retention periods %v", logRetentions), "retention of every log group"),
		k("namespace", "DNS name", "<flock:name>.flock.internal", "lower case, at least two labels", "Cloud Map namespace the bus is found in"),
		k("operatorCidrs", "list of IPv4 CIDRs", "", "private network addresses of at most /8", "ranges (a VPN) that may reach the bus's client port"),
		k("agentContext", "path", "agent", "", "docker build context of the images"),
		k("baseImage", "image reference", "(the Dockerfile's BASE)", "", "base of the stock images"),
		k("imageTag", "string", "(derived from the build inputs)", "a docker tag: letters, digits, _ . -, at most 101 characters", "tag of the stock images"),
		k("cpuArchitecture", "string", string(DefaultCPUArchitecture), fmt.Sprintf("%q or %q, with its binaries built", X86_64, ARM64), "CPU architecture of every task and image"),
		k("createServiceLinkedRole", "boolean", "false", "", "declare ECS's service-linked role (a fresh account)"),
		k("storageAlarmGiB", "integer", "(derived from the flock)", fmt.Sprintf("1 to %d", 8<<20), "file system size past which its alarm fires"),
		k("logRateKiB", "integer", fmt.Sprint(DefaultLogRateKiB), fmt.Sprintf("1 to %d", MaxLogRateKiB), "KiB a second each agent's task may write to CloudWatch Logs (bursts of 16 times that; the excess is dropped and counted in notes, docs/aws.md)"),
		k("alarmActions", "list of SNS topic ARNs", "", "at most 5", "what the storage and log alarms notify"),
		k("metrics", "string", protocol.EMFFlock, protocol.EMFOff+", "+protocol.EMFFlock+" or "+protocol.EMFAgents, "the flock's metrics in CloudWatch (embedded metric format) and a dashboard: none, the flock's figures, or every agent's too (cost: docs/aws.md)"),
	}
}
