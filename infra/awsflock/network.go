package awsflock

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// InterfaceEndpoints are the AWS services a Fargate task of the flock calls
// through its own network interface: image pulls (ECR API and registry),
// awslogs, and secrets injection. Layers come from S3 (a gateway endpoint).
var InterfaceEndpoints = []string{"ecr.api", "ecr.dkr", "logs", "secretsmanager"}

// Subnet returns the i-th of the 16 equal subnets of the VPC range: 0 … AZCount-1
// are private (one per zone); with a model gateway, EgressSubnetBase …
// EgressSubnetBase+AZCount-1 are the gateway's (one per zone, routed to the
// NAT gateway); the last one is the public subnet of the NAT gateway.
func Subnet(cidr netip.Prefix, i int) (netip.Prefix, error) {
	bits := cidr.Bits() + 4
	if !cidr.Addr().Is4() || bits > 28 || i < 0 || i > 15 {
		return netip.Prefix{}, fmt.Errorf("cannot take subnet %d of %s", i, cidr)
	}
	base := cidr.Masked().Addr().As4()
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	v += uint32(i) << (32 - bits)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), bits), nil
}

// PrivateCapacity is how many task addresses the private subnets hold (AWS
// reserves 5 addresses of each subnet; endpoints and mount targets take one each).
func PrivateCapacity(cidr netip.Prefix, azs int) int {
	per := 1<<(32-(cidr.Bits()+4)) - 5 - len(InterfaceEndpoints) - 1
	return per * azs
}

// subnet declares a subnet of vpc without public addresses, named name
// (and its route table association too), tagged with role, routed by rt.
func (d *declarer) subnet(name string, vpc *ec2.Vpc, cidr netip.Prefix, zone string, rt *ec2.RouteTable, role string) (pulumi.IDOutput, error) {
	sub, err := ec2.NewSubnet(d.ctx, name, &ec2.SubnetArgs{
		VpcId: vpc.ID(), CidrBlock: pulumi.String(cidr.String()),
		AvailabilityZone:    pulumi.String(zone),
		MapPublicIpOnLaunch: pulumi.Bool(false),
		Tags:                d.tags(role, ""),
	}, d.parent)
	if err != nil {
		return pulumi.IDOutput{}, fmt.Errorf("subnet %s: %w", name, err)
	}
	if _, err := ec2.NewRouteTableAssociation(d.ctx, name, &ec2.RouteTableAssociationArgs{
		SubnetId: sub.ID(), RouteTableId: rt.ID(),
	}, d.parent); err != nil {
		return pulumi.IDOutput{}, fmt.Errorf("route table association %s: %w", name, err)
	}
	return sub.ID(), nil
}

func (d *declarer) network(reverseDNS string) error {
	n := d.args.Network
	if n.VpcID != "" {
		if err := d.checkSubnets(); err != nil {
			return err
		}
		d.vpcID = pulumi.String(n.VpcID).ToStringOutput()
		d.subnets = pulumi.ToStringArray(n.SubnetIDs)
		d.routeTables = pulumi.ToStringArray(n.RouteTableIDs)
	} else if err := d.newVPC(); err != nil {
		return err
	}
	if err := d.securityGroups(); err != nil {
		return err
	}
	if d.m.Gateway.Enabled() {
		if err := d.gatewaySecurityGroup(); err != nil {
			return err
		}
	}
	switch n.Egress {
	case EgressEndpoints:
		return d.endpoints(reverseDNS)
	case EgressNAT:
		return nil // routes made with the VPC, or the existing VPC's own
	default:
		return fmt.Errorf("egress %q: must be %q or %q", n.Egress, EgressEndpoints, EgressNAT)
	}
}

// ZoneTypeFilter keeps the region's Availability Zones out of the zones
// DescribeAvailabilityZones lists: Local Zones and Wavelength Zones (which an
// account that opted in sees too) run neither Fargate nor EFS.
var ZoneTypeFilter = aws.GetAvailabilityZonesFilter{Name: "zone-type", Values: []string{"availability-zone"}}

// availabilityZones are the region's available Availability Zones, in the
// order EC2 lists them, split into those Fargate serves and the rest
// (FargateZones, by zone ID).
func (d *declarer) availabilityZones() (serves, not []Zone, err error) {
	azs, err := aws.GetAvailabilityZones(d.ctx, &aws.GetAvailabilityZonesArgs{
		State:   pulumi.StringRef("available"),
		Filters: []aws.GetAvailabilityZonesFilter{ZoneTypeFilter},
	}, d.invoke)
	if err != nil {
		return nil, nil, fmt.Errorf("availability zones: %w", err)
	}
	if len(azs.ZoneIds) != len(azs.Names) {
		return nil, nil, fmt.Errorf("availability zones: %d names but %d zone IDs", len(azs.Names), len(azs.ZoneIds))
	}
	var zones []Zone
	for i, name := range azs.Names {
		zones = append(zones, Zone{Name: name, ID: azs.ZoneIds[i]})
	}
	serves, not = fargateZones(d.region, zones)
	return serves, not, nil
}

func zoneNames(zones []Zone) []string {
	var out []string
	for _, z := range zones {
		out = append(out, z.Name)
	}
	return out
}

// checkSubnets looks up flock:aws.subnetIds before anything is declared in
// them: each must be a subnet of flock:aws.vpcId, in an Availability Zone
// (Fargate and EFS are in no Local or Wavelength Zone), and no two in one
// zone: EFS takes one mount target per zone and the file system gets one
// per subnet, so a second subnet in a zone fails at deploy. Every problem
// is reported, each naming its flock:aws.subnetIds[i].
func (d *declarer) checkSubnets() error {
	n := d.args.Network
	serves, not, err := d.availabilityZones()
	if err != nil {
		return err
	}
	zones := zoneNames(serves)
	var errs []error
	first := map[string]int{} // zone -> index of the first subnet in it
	for i, id := range n.SubnetIDs {
		key := fmt.Sprintf("%s.subnetIds[%d]", Key, i)
		bad := func(format string, a ...any) {
			errs = append(errs, &flock.Error{Key: key, Rule: fmt.Sprintf(format, a...)})
		}
		sub, err := ec2.LookupSubnet(d.ctx, &ec2.LookupSubnetArgs{Id: pulumi.StringRef(id)}, d.invoke)
		if err != nil {
			bad("%s: no such subnet in this account and region (%v)", id, err)
			continue
		}
		if sub.VpcId != n.VpcID {
			bad("%s is a subnet of %s, not of %s.vpcId %s", id, sub.VpcId, Key, n.VpcID)
		}
		if i := slices.IndexFunc(not, func(z Zone) bool { return z.Name == sub.AvailabilityZone }); i >= 0 {
			bad("%s is in %s, a zone where Fargate runs no tasks (only %s do in %s, by AWS's Fargate Regions table as of %s)", id, not[i], strings.Join(FargateZones[d.region], ", "), d.region, FargateZonesAsOf)
			continue
		}
		if !slices.Contains(zones, sub.AvailabilityZone) {
			bad("%s is in %s, which is not an available Availability Zone of the region (a Local or Wavelength Zone has no Fargate and no EFS)", id, sub.AvailabilityZone)
			continue
		}
		if j, taken := first[sub.AvailabilityZone]; taken {
			bad("%s is in %s, like %s.subnetIds[%d] (%s): EFS takes one mount target per Availability Zone, and the file system gets one per subnet; list one private subnet per zone", id, sub.AvailabilityZone, Key, j, n.SubnetIDs[j])
			continue
		}
		first[sub.AvailabilityZone] = i
	}
	return errors.Join(errs...)
}

// newVPC declares a VPC with one private subnet per availability zone and,
// for NAT egress, one public subnet holding the NAT gateway.
func (d *declarer) newVPC() error {
	n := d.args.Network
	serves, not, err := d.availabilityZones()
	if err != nil {
		return err
	}
	if len(serves) < n.AZCount {
		return &flock.Error{Key: Key + ".availabilityZones", Rule: fmt.Sprintf("the region %s has %d available Availability Zones where Fargate runs tasks, %d asked%s", d.region, len(serves), n.AZCount, fargateNote(d.region, not))}
	}
	// The first zones Fargate serves, in EC2's order (so a region without
	// exceptions keeps the zones it always had).
	zones := zoneNames(serves)
	vpc, err := ec2.NewVpc(d.ctx, d.n("vpc"), &ec2.VpcArgs{
		CidrBlock: pulumi.String(n.CIDR.String()),
		// Both are needed by interface endpoints' private DNS and by Cloud Map.
		EnableDnsSupport:   pulumi.Bool(true),
		EnableDnsHostnames: pulumi.Bool(true),
		Tags:               d.tags("network", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("vpc: %w", err)
	}
	d.vpcID = vpc.ID().ToStringOutput()
	// Nothing uses the VPC's default security group; strip its rules so nothing can.
	if _, err := ec2.NewDefaultSecurityGroup(d.ctx, d.n("default-sg"), &ec2.DefaultSecurityGroupArgs{
		VpcId: vpc.ID(), Tags: d.tags("network", ""),
	}, d.parent); err != nil {
		return fmt.Errorf("default security group: %w", err)
	}
	rt, err := ec2.NewRouteTable(d.ctx, d.n("private-rt"), &ec2.RouteTableArgs{VpcId: vpc.ID(), Tags: d.tags("network", "")}, d.parent)
	if err != nil {
		return fmt.Errorf("route table: %w", err)
	}
	d.routeTables = pulumi.StringArray{rt.ID()}
	for i := 0; i < n.AZCount; i++ {
		cidr, err := Subnet(n.CIDR, i)
		if err != nil {
			return err
		}
		name := d.n("private", strconv.Itoa(i+1))
		id, err := d.subnet(name, vpc, cidr, zones[i], rt, "network")
		if err != nil {
			return err
		}
		d.subnets = append(d.subnets, id)
	}
	if d.m.Gateway.Enabled() {
		// The gateway's route out, in subnets of its own: the private
		// subnets (agents, the bus, the operator) keep none.
		return d.gatewayEgress(vpc, zones)
	}
	if n.Egress != EgressNAT {
		return nil
	}
	nat, err := d.natGateway(vpc, zones[0])
	if err != nil {
		return err
	}
	route, err := ec2.NewRoute(d.ctx, d.n("private-default"), &ec2.RouteArgs{
		RouteTableId: rt.ID(), DestinationCidrBlock: pulumi.String("0.0.0.0/0"), NatGatewayId: nat.ID(),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("private default route: %w", err)
	}
	d.ready = append(d.ready, route)
	return nil
}

// natGateway declares one NAT gateway in zone, in a public subnet (the 16th
// of the VPC range) whose route table sends everything to an internet
// gateway. It routes whatever route table points at it: the private one with
// egress "nat", the gateway's own with a model gateway.
func (d *declarer) natGateway(vpc *ec2.Vpc, zone string) (*ec2.NatGateway, error) {
	n := d.args.Network
	// One NAT gateway in the first zone: half the price of one per zone; if
	// that zone fails, tasks elsewhere keep running but cannot pull or log.
	igw, err := ec2.NewInternetGateway(d.ctx, d.n("igw"), &ec2.InternetGatewayArgs{VpcId: vpc.ID(), Tags: d.tags("network", "")}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("internet gateway: %w", err)
	}
	cidr, err := Subnet(n.CIDR, 15)
	if err != nil {
		return nil, err
	}
	pub, err := ec2.NewSubnet(d.ctx, d.n("public-1"), &ec2.SubnetArgs{
		VpcId: vpc.ID(), CidrBlock: pulumi.String(cidr.String()),
		AvailabilityZone: pulumi.String(zone), MapPublicIpOnLaunch: pulumi.Bool(false),
		Tags: d.tags("network", ""),
	}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("public subnet: %w", err)
	}
	pubRT, err := ec2.NewRouteTable(d.ctx, d.n("public-rt"), &ec2.RouteTableArgs{VpcId: vpc.ID(), Tags: d.tags("network", "")}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("public route table: %w", err)
	}
	if _, err := ec2.NewRoute(d.ctx, d.n("public-default"), &ec2.RouteArgs{
		RouteTableId: pubRT.ID(), DestinationCidrBlock: pulumi.String("0.0.0.0/0"), GatewayId: igw.ID(),
	}, d.parent); err != nil {
		return nil, fmt.Errorf("public route: %w", err)
	}
	if _, err := ec2.NewRouteTableAssociation(d.ctx, d.n("public-1"), &ec2.RouteTableAssociationArgs{
		SubnetId: pub.ID(), RouteTableId: pubRT.ID(),
	}, d.parent); err != nil {
		return nil, fmt.Errorf("public route table association: %w", err)
	}
	eip, err := ec2.NewEip(d.ctx, d.n("nat-ip"), &ec2.EipArgs{Domain: pulumi.String("vpc"), Tags: d.tags("network", "")}, d.parent)
	if err != nil {
		return nil, fmt.Errorf("nat address: %w", err)
	}
	nat, err := ec2.NewNatGateway(d.ctx, d.n("nat"), &ec2.NatGatewayArgs{
		AllocationId: eip.ID(), SubnetId: pub.ID(), Tags: d.tags("network", ""),
	}, d.parent, pulumi.DependsOn([]pulumi.Resource{igw}))
	if err != nil {
		return nil, fmt.Errorf("nat gateway: %w", err)
	}
	return nat, nil
}

// endpoints declares the interface endpoints (private DNS, so the SDKs in
// ECS and Fargate find them under the usual names; this account's callers
// only) and the S3 gateway
// endpoint for ECR's layers, then lets the tasks reach S3 through its prefix list.
func (d *declarer) endpoints(reverseDNS string) error {
	for _, svc := range InterfaceEndpoints {
		ep, err := ec2.NewVpcEndpoint(d.ctx, d.n("endpoint", svc), &ec2.VpcEndpointArgs{
			VpcId: d.vpcID, ServiceName: pulumi.Sprintf("%s.%s.%s", reverseDNS, d.region, svc),
			VpcEndpointType:   pulumi.String("Interface"),
			PrivateDnsEnabled: pulumi.Bool(true),
			SubnetIds:         d.subnets,
			SecurityGroupIds:  pulumi.StringArray{d.sg.endpoints.ID()},
			Policy:            pulumi.String(OwnAccountEndpointPolicy(d.account)),
			Tags:              d.tags("network", ""),
		}, d.parent)
		if err != nil {
			return fmt.Errorf("endpoint %s: %w", svc, err)
		}
		d.ready = append(d.ready, ep)
	}
	s3, err := ec2.NewVpcEndpoint(d.ctx, d.n("endpoint", "s3"), &ec2.VpcEndpointArgs{
		VpcId: d.vpcID, ServiceName: pulumi.Sprintf("%s.%s.s3", reverseDNS, d.region),
		VpcEndpointType: pulumi.String("Gateway"),
		RouteTableIds:   d.routeTables,
		Policy:          pulumi.String(ECRLayerBucketPolicy(d.partition, d.region)),
		Tags:            d.tags("network", ""),
	}, d.parent)
	if err != nil {
		return fmt.Errorf("endpoint s3: %w", err)
	}
	d.ready = append(d.ready, s3)
	for _, c := range []struct {
		role string
		sg   *ec2.SecurityGroup
	}{{"agents", d.sg.agents}, {"bus", d.sg.bus}, {"operator", d.sg.operator}, {"services", d.sg.services}} {
		if _, err := ec2.NewSecurityGroupRule(d.ctx, d.n("sg", c.role+"-to-s3"), &ec2.SecurityGroupRuleArgs{
			Type: pulumi.String("egress"), SecurityGroupId: c.sg.ID(),
			Protocol: pulumi.String("tcp"), FromPort: pulumi.Int(portHTTPS), ToPort: pulumi.Int(portHTTPS),
			PrefixListIds: pulumi.StringArray{s3.PrefixListId},
			Description:   pulumi.String("HTTPS to S3 (image layers) through the gateway endpoint"),
		}, d.parent); err != nil {
			return fmt.Errorf("security group rule %s-to-s3: %w", c.role, err)
		}
	}
	return nil
}
