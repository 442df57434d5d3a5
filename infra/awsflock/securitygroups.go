package awsflock

import (
	"fmt"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/protocol"
)

// Ports the security groups open.
const (
	portNFS   = 2049
	portHTTPS = 443
)

// securityGroups: agents accept nothing and reach only the bus, EFS and the
// AWS endpoints; the flock's services accept nothing and reach only the bus
// and the endpoints; the bus accepts 4222 from agents, the services and the operator, and the
// nodes of a clustered bus 6222 (routes) from each other only; EFS accepts
// 2049 from agents, the operator and a single bus (cluster nodes mount no EFS); the endpoints accept
// 443 from the flock's tasks. Rules are separate resources: the groups refer
// to each other. (The provider removes AWS's default allow-all egress rule.)
func (d *declarer) securityGroups() error {
	// Descriptions (of groups and of rules) are in the characters EC2
	// accepts (awsrules.SecurityGroupDescription: no apostrophe, no quotes);
	// any other is refused at deploy time, after the preview passed.
	mk := func(name, desc string) (*ec2.SecurityGroup, error) {
		role := map[string]string{"agents": "agent", "efs": "storage", "endpoints": "network"}[name]
		if role == "" {
			role = name
		}
		sg, err := ec2.NewSecurityGroup(d.ctx, d.n(name, "sg"), &ec2.SecurityGroupArgs{
			VpcId: d.vpcID, Description: pulumi.String(desc),
			RevokeRulesOnDelete: pulumi.Bool(true),
			Tags:                d.tags(role, ""),
		}, d.parent)
		if err != nil {
			return nil, fmt.Errorf("security group %s: %w", name, err)
		}
		return sg, nil
	}
	var err error
	if d.sg.agents, err = mk("agents", "AI Flock agents: no ingress; egress to the bus, EFS and AWS endpoints only"); err != nil {
		return err
	}
	if d.sg.bus, err = mk("bus", "AI Flock bus: NATS 4222 from agents and the operator"); err != nil {
		return err
	}
	if d.sg.efs, err = mk("efs", "AI Flock EFS: NFS 2049 from the flock tasks"); err != nil {
		return err
	}
	if d.sg.operator, err = mk("operator", "AI Flock operator task: no ingress; egress to the bus, EFS and AWS endpoints only"); err != nil {
		return err
	}
	if d.sg.services, err = mk("services", "AI Flock services (the board): no ingress; egress to the bus and AWS endpoints only"); err != nil {
		return err
	}
	if d.args.Network.Egress == EgressEndpoints {
		if d.sg.endpoints, err = mk("endpoints", "AI Flock VPC endpoints: HTTPS 443 from the flock tasks"); err != nil {
			return err
		}
	}

	rules := []rule{
		{"bus-from-agents", d.sg.bus, "ingress", protocol.ClientPort, d.sg.agents, nil, "NATS from agents"},
		{"bus-from-operator", d.sg.bus, "ingress", protocol.ClientPort, d.sg.operator, nil, "NATS from the operator task"},
		{"bus-monitor-from-operator", d.sg.bus, "ingress", protocol.MonitorPort, d.sg.operator, nil, "NATS monitoring from the operator task"},
		{"agents-to-bus", d.sg.agents, "egress", protocol.ClientPort, d.sg.bus, nil, "NATS to the bus"},
		{"operator-to-bus", d.sg.operator, "egress", protocol.ClientPort, d.sg.bus, nil, "NATS to the bus"},
		{"operator-to-bus-monitor", d.sg.operator, "egress", protocol.MonitorPort, d.sg.bus, nil, "NATS monitoring of the bus"},
		// The flock's services listen on nothing: their group admits
		// nothing, and reaches the bus (and the endpoints, below) only.
		{"bus-from-services", d.sg.bus, "ingress", protocol.ClientPort, d.sg.services, nil, "NATS from the flock services"},
		{"services-to-bus", d.sg.services, "egress", protocol.ClientPort, d.sg.bus, nil, "NATS to the bus"},
	}
	if len(d.args.OperatorCIDRs) > 0 {
		rules = append(rules, rule{"bus-from-operator-cidrs", d.sg.bus, "ingress", protocol.ClientPort, nil, d.args.OperatorCIDRs, "NATS from the operator network (flock:aws.operatorCidrs)"})
	}
	if d.m.Bus.Clustered() {
		// Routes between the nodes: the bus group admits itself, and no one else.
		rules = append(rules,
			rule{"bus-routes-from-bus", d.sg.bus, "ingress", protocol.RoutePort, d.sg.bus, nil, "NATS cluster routes from the other bus nodes"},
			rule{"bus-routes-to-bus", d.sg.bus, "egress", protocol.RoutePort, d.sg.bus, nil, "NATS cluster routes to the other bus nodes"},
		)
	}
	for _, c := range []struct {
		role string
		sg   *ec2.SecurityGroup
	}{{"agents", d.sg.agents}, {"bus", d.sg.bus}, {"operator", d.sg.operator}, {"services", d.sg.services}} {
		// The services and a cluster's nodes mount no EFS.
		if c.role != "services" && (c.role != "bus" || !d.m.Bus.Clustered()) {
			rules = append(rules,
				rule{"efs-from-" + c.role, d.sg.efs, "ingress", portNFS, c.sg, nil, "NFS from " + c.role},
				rule{c.role + "-to-efs", c.sg, "egress", portNFS, d.sg.efs, nil, "NFS to EFS"},
			)
		}
		switch d.args.Network.Egress {
		case EgressEndpoints:
			rules = append(rules,
				rule{"endpoints-from-" + c.role, d.sg.endpoints, "ingress", portHTTPS, c.sg, nil, "HTTPS from " + c.role},
				rule{c.role + "-to-endpoints", c.sg, "egress", portHTTPS, d.sg.endpoints, nil, "HTTPS to the VPC endpoints"},
			)
		case EgressNAT:
			rules = append(rules, rule{c.role + "-to-aws", c.sg, "egress", portHTTPS, nil, []string{"0.0.0.0/0"}, "HTTPS to AWS APIs through the NAT gateway"})
		}
	}
	return d.declareRules(rules)
}

// rule is one security group rule: a TCP port in or out of sg, from or to
// a peer group or address ranges.
type rule struct {
	name  string
	sg    *ec2.SecurityGroup
	kind  string // ingress | egress
	port  int
	peer  *ec2.SecurityGroup
	cidrs []string
	desc  string
}

// declareRules declares security group rules, one TCP port each, from a
// peer group or address ranges.
func (d *declarer) declareRules(rules []rule) error {
	for _, r := range rules {
		args := &ec2.SecurityGroupRuleArgs{
			Type: pulumi.String(r.kind), SecurityGroupId: r.sg.ID(),
			Protocol: pulumi.String("tcp"), FromPort: pulumi.Int(r.port), ToPort: pulumi.Int(r.port),
			Description: pulumi.String(r.desc),
		}
		if r.peer != nil {
			args.SourceSecurityGroupId = r.peer.ID()
		}
		if r.cidrs != nil {
			args.CidrBlocks = pulumi.ToStringArray(r.cidrs)
		}
		if _, err := ec2.NewSecurityGroupRule(d.ctx, d.n("sg", r.name), args, d.parent); err != nil {
			return fmt.Errorf("security group rule %s: %w", r.name, err)
		}
	}
	return nil
}
