package awsrules

// The Pulumi aws provider's type tokens of the resources the project names.
// This is the one list of them: the stack's components, the policy rules
// (infra/policy/rules) and the mock engine of the tests (tests/capture) all
// name AWS resources by these tokens, and a token spelled in two places can
// drift apart in one.
const (
	// EC2 and VPC.
	TypeVpc                   = "aws:ec2/vpc:Vpc"
	TypeSubnet                = "aws:ec2/subnet:Subnet"
	TypeRouteTable            = "aws:ec2/routeTable:RouteTable"
	TypeRoute                 = "aws:ec2/route:Route"
	TypeRouteTableAssociation = "aws:ec2/routeTableAssociation:RouteTableAssociation"
	TypeInternetGateway       = "aws:ec2/internetGateway:InternetGateway"
	TypeNatGateway            = "aws:ec2/natGateway:NatGateway"
	TypeEip                   = "aws:ec2/eip:Eip"
	TypeVpcEndpoint           = "aws:ec2/vpcEndpoint:VpcEndpoint"
	TypeSecurityGroup         = "aws:ec2/securityGroup:SecurityGroup"
	TypeSecurityGroupRule     = "aws:ec2/securityGroupRule:SecurityGroupRule"
	TypeSGIngressRule         = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
	TypeSGEgressRule          = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
	TypeDefaultSG             = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"

	// EFS.
	TypeFileSystem       = "aws:efs/fileSystem:FileSystem"
	TypeMountTarget      = "aws:efs/mountTarget:MountTarget"
	TypeFileSystemPolicy = "aws:efs/fileSystemPolicy:FileSystemPolicy"
	TypeAccessPoint      = "aws:efs/accessPoint:AccessPoint"

	// ECR.
	TypeRepository      = "aws:ecr/repository:Repository"
	TypeLifecyclePolicy = "aws:ecr/lifecyclePolicy:LifecyclePolicy"

	// CloudWatch.
	TypeLogGroup    = "aws:cloudwatch/logGroup:LogGroup"
	TypeMetricAlarm = "aws:cloudwatch/metricAlarm:MetricAlarm"
	TypeDashboard   = "aws:cloudwatch/dashboard:Dashboard"

	// Secrets Manager.
	TypeSecret        = "aws:secretsmanager/secret:Secret"
	TypeSecretVersion = "aws:secretsmanager/secretVersion:SecretVersion"

	// IAM.
	TypeRole              = "aws:iam/role:Role"
	TypeRolePolicy        = "aws:iam/rolePolicy:RolePolicy"
	TypeServiceLinkedRole = "aws:iam/serviceLinkedRole:ServiceLinkedRole"

	// ECS.
	TypeCluster        = "aws:ecs/cluster:Cluster"
	TypeTaskDefinition = "aws:ecs/taskDefinition:TaskDefinition"
	TypeService        = "aws:ecs/service:Service"

	// Cloud Map (service discovery).
	TypeNamespace        = "aws:servicediscovery/privateDnsNamespace:PrivateDnsNamespace"
	TypeDiscoveryService = "aws:servicediscovery/service:Service"

	// Route 53 Resolver DNS Firewall.
	TypeFirewallDomainList     = "aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList"
	TypeFirewallRuleGroup      = "aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup"
	TypeFirewallRule           = "aws:route53/resolverFirewallRule:ResolverFirewallRule"
	TypeFirewallRuleGroupAssoc = "aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation"
	TypeFirewallConfig         = "aws:route53/resolverFirewallConfig:ResolverFirewallConfig"

	// TypeAny stands for every resource of the aws provider (tags).
	TypeAny = "aws:*"
)
