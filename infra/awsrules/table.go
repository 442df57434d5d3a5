package awsrules

import "regexp"

// The characters EC2 allows in security group names and descriptions and in
// security group rule descriptions (EC2-VPC).
const ec2Chars = `a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*`

// iamName is the rule of an IAM name of at most maxLen characters: [\w+=,.@-]
// (\w is [A-Za-z0-9_]).
func iamName(what, typ, input, field string, maxLen int, ref string) Rule {
	return Rule{What: what, Type: typ, Input: input, Field: field,
		Min: 1, Max: maxLen, Chars: chars(`\w+=,.@-`), Allowed: `[\w+=,.@-]`, Ref: ref}
}

// ecsName is the rule of an ECS name: up to 255 letters, digits, hyphens
// and underscores.
func ecsName(what, typ, input, field, ref string) Rule {
	return Rule{What: what, Type: typ, Input: input, Field: field,
		Min: 1, Max: 255, Chars: chars(`A-Za-z0-9_-`), Allowed: "letters, digits, _ and -", Ref: ref}
}

// The rules. Each names the AWS reference it comes from; the facts were
// checked in those references (or the SDK and CloudFormation docs that
// quote them) unless the comment says otherwise.
var (
	// EC2 API Reference, CreateSecurityGroup, GroupName: "Up to 255
	// characters in length. Cannot start with sg-. Valid characters: a-z,
	// A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*".
	SecurityGroupName = Rule{
		What: "security group name", Type: TypeSecurityGroup, Input: "name", Field: "CreateSecurityGroup GroupName",
		Min: 1, Max: 255, Chars: chars(ec2Chars), Allowed: "a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$*", Reserved: "sg-",
		Ref: "EC2 API Reference, CreateSecurityGroup, GroupName",
	}
	// EC2 API Reference, CreateSecurityGroup, GroupDescription: "Up to 255
	// characters in length. Valid characters: a-z, A-Z, 0-9, spaces, and
	// ._-:/()#,@[]+=&;{}!$*". An apostrophe is InvalidParameterValue.
	SecurityGroupDescription = Rule{
		What: "security group description", Type: TypeSecurityGroup, Input: "description", Field: "CreateSecurityGroup GroupDescription",
		Max: 255, Chars: chars(ec2Chars), Allowed: "a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$*",
		Ref: "EC2 API Reference, CreateSecurityGroup, GroupDescription",
	}
	// EC2 API Reference, IpRange / Ipv6Range / PrefixListId /
	// UserIdGroupPair, Description: "Up to 255 characters in length.
	// Allowed characters are a-z, A-Z, 0-9, spaces, and
	// ._-:/()#,@[]+=&;{}!$*" (the rules of AuthorizeSecurityGroupIngress
	// and Egress, which security group rule resources call).
	SecurityGroupRuleDescription = Rule{
		What: "security group rule description", Type: TypeSecurityGroupRule, Input: "description", Field: "IpRange Description",
		Max: 255, Chars: chars(ec2Chars), Allowed: "a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$*",
		Ref: "EC2 API Reference, IpRange, Description",
	}
	// IAM API Reference, CreateRole, RoleName: length 1 to 64, pattern
	// [\w+=,.@-]+.
	IAMRoleName = iamName("IAM role name", TypeRole, "name", "CreateRole RoleName", 64, "IAM API Reference, CreateRole, RoleName")
	// Not an AWS rule: the provider (terraform-provider-aws, under
	// pulumi-aws) adds a 26-character unique suffix to a role's namePrefix
	// and refuses a prefix longer than 64 - 26 = 38. Characters as RoleName.
	IAMRoleNamePrefix = iamName("IAM role name prefix", TypeRole, "namePrefix", "CreateRole RoleName (prefix)", 38, "IAM API Reference, CreateRole, RoleName, less the provider's 26-character unique suffix (not verified in the search tool's corpus)")
	// IAM API Reference, CreateRole, Description: "Maximum length of 1000.
	// Pattern: [\u0009\u000A\u000D\u0020-\u007E\u00A1-\u00FF]*".
	IAMRoleDescription = Rule{
		What: "IAM role description", Type: TypeRole, Input: "description", Field: "CreateRole Description",
		Max: 1000, Chars: chars(`\x{0009}\x{000A}\x{000D}\x{0020}-\x{007E}\x{00A1}-\x{00FF}`), Allowed: `[\u0009\u000A\u000D\u0020-\u007E\u00A1-\u00FF]`,
		Ref: "IAM API Reference, CreateRole, Description",
	}
	// IAM API Reference, PutRolePolicy, PolicyName: length 1 to 128,
	// pattern [\w+=,.@-]+ (the characters verified; the length from the
	// reference's policyNameType, not shown by the search tool).
	IAMRolePolicyName = iamName("IAM role policy name", TypeRolePolicy, "name", "PutRolePolicy PolicyName", 128, "IAM API Reference, PutRolePolicy, PolicyName")
	// ECS API Reference, RegisterTaskDefinition, family: "Up to 255 letters
	// (uppercase and lowercase), numbers, underscores, and hyphens are
	// allowed."
	ECSTaskFamily = ecsName("ECS task definition family", TypeTaskDefinition, "family", "RegisterTaskDefinition family", "ECS API Reference, RegisterTaskDefinition, family")
	// ECS API Reference, ContainerDefinition, name: "Up to 255 letters
	// (uppercase and lowercase), numbers, underscores, and hyphens are
	// allowed."
	ECSContainerName = ecsName("ECS container name", TypeTaskDefinition, "containerDefinitions[].name", "ContainerDefinition name", "ECS API Reference, ContainerDefinition, name")
	// ECS API Reference, CreateService, serviceName: "Up to 255 letters
	// (uppercase and lowercase), numbers, underscores, and hyphens are
	// allowed." (verified as the pulumi-aws docs quote it).
	ECSServiceName = ecsName("ECS service name", TypeService, "name", "CreateService serviceName", "ECS API Reference, CreateService, serviceName")
	// ECS API Reference, CreateCluster, clusterName: "Up to 255 letters
	// (uppercase and lowercase), numbers, underscores, and hyphens are
	// allowed." (not verified in the search tool's corpus).
	ECSClusterName = ecsName("ECS cluster name", TypeCluster, "name", "CreateCluster clusterName", "ECS API Reference, CreateCluster, clusterName")
	// Cloud Map API Reference, CreateService, Name: at most 127 characters,
	// dot-separated labels of up to 63. A service of a DNS namespace names
	// the records <name>.<namespace>: the flock's are A records, one label,
	// so a DNS label (RFC 1035: up to 63 letters, digits and hyphens, not
	// starting or ending with a hyphen) is required here. (The API also
	// admits underscores, for SRV-style names; the exact pattern was not
	// found in the search tool's corpus.)
	CloudMapServiceName = Rule{
		What: "Cloud Map service name", Type: TypeDiscoveryService, Input: "name", Field: "CreateService Name",
		Min: 1, Max: 63, Chars: chars(`A-Za-z0-9-`), Allowed: "letters, digits and -",
		Shape: regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`), ShapeText: "one DNS label, not starting or ending with -",
		Ref: "Cloud Map API Reference, CreateService, Name",
	}
	// Cloud Map API Reference, CreatePrivateDnsNamespace, Name: "Maximum
	// length of 253. Pattern: ^[!-~]{1,253}$"; the namespace becomes a
	// Route 53 private hosted zone of that name, so it must be a DNS name:
	// labels of up to 63 letters, digits and hyphens.
	CloudMapNamespaceName = Rule{
		What: "Cloud Map namespace name", Type: TypeNamespace, Input: "name", Field: "CreatePrivateDnsNamespace Name",
		Min: 1, Max: 253, Chars: chars(`A-Za-z0-9.-`), Allowed: "letters, digits, - and .",
		Shape:     regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`),
		ShapeText: "DNS labels of up to 63 characters separated by dots",
		Ref:       "Cloud Map API Reference, CreatePrivateDnsNamespace, Name",
	}
	// CloudWatch Logs API Reference, CreateLogGroup, logGroupName: length 1
	// to 512, pattern [\.\-_/#A-Za-z0-9]+.
	LogGroupName = Rule{
		What: "CloudWatch log group name", Type: TypeLogGroup, Input: "name", Field: "CreateLogGroup logGroupName",
		Min: 1, Max: 512, Chars: chars(`.\-_/#A-Za-z0-9`), Allowed: "[.-_/#A-Za-z0-9]",
		Ref: "CloudWatch Logs API Reference, CreateLogGroup, logGroupName",
	}
	// CloudWatch API Reference, PutDashboard, DashboardName: "The maximum
	// length is 255, and valid characters are A-Z, a-z, 0-9, "-", and "_"."
	DashboardName = Rule{
		What: "CloudWatch dashboard name", Type: TypeDashboard, Input: "dashboardName", Field: "PutDashboard DashboardName",
		Min: 1, Max: 255, Chars: chars(`A-Za-z0-9_-`), Allowed: "A-Z a-z 0-9 - _",
		Ref: "CloudWatch API Reference, PutDashboard, DashboardName",
	}
	// Tagging AWS Resources (and each service's Tag type, e.g. ECS API
	// Reference, Tag): keys up to 128 Unicode characters; letters, digits,
	// spaces and _ . : / = + - @ are allowed across services; the aws:
	// prefix (any case) is reserved for AWS's use.
	TagKey = Rule{
		What: "tag key", Type: TypeAny, Input: "tags", Field: "Tag Key",
		Min: 1, Max: 128, Chars: chars(`\p{L}\p{Z}\p{N}_.:/=+\-@`), Allowed: "letters, digits, spaces and _ . : / = + - @", Reserved: "aws:",
		Ref: "Tagging AWS Resources, tag naming limits; ECS API Reference, Tag",
	}
	// Tag values: up to 256 characters, the same characters; ECS's Tag
	// reference reserves aws: for values too.
	TagValue = Rule{
		What: "tag value", Type: TypeAny, Input: "tags", Field: "Tag Value",
		Max: 256, Chars: chars(`\p{L}\p{Z}\p{N}_.:/=+\-@`), Allowed: "letters, digits, spaces and _ . : / = + - @", Reserved: "aws:",
		Ref: "Tagging AWS Resources, tag naming limits; ECS API Reference, Tag",
	}
	// ECR API Reference, CreateRepository / Repository, repositoryName:
	// "Minimum length of 2. Maximum length of 256. Pattern:
	// (?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*".
	ECRRepositoryName = Rule{
		What: "ECR repository name", Type: TypeRepository, Input: "name", Field: "CreateRepository repositoryName",
		Min: 2, Max: 256, Chars: chars(`a-z0-9._/-`), Allowed: "lower-case letters, digits, . _ - and /",
		Shape:     regexp.MustCompile(`^(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*$`),
		ShapeText: "components of lower-case letters and digits joined by single . _ or -, separated by /",
		Ref:       "ECR API Reference, CreateRepository, repositoryName",
	}
	// EFS API Reference, RootDirectory, Path: "A path can have up to four
	// subdirectories", "Minimum length of 1. Maximum length of 100.
	// Pattern: ^(\/|(\/(?!\.)+[^$#<>;`|&?{}^*/\n]+){1,4})$". (RE2 has no
	// look-ahead: Shape writes "no component starting with ." out.)
	EFSAccessPointPath = Rule{
		What: "EFS access point root directory path", Type: TypeAccessPoint, Input: "rootDirectory.path", Field: "RootDirectory Path",
		Min: 1, Max: 100, Chars: regexp.MustCompile("^[^$#<>;`|&?{}^*\\n]$"), Allowed: "any character but $#<>;`|&?{}^* and newline",
		Shape:     regexp.MustCompile(`^(/|(/[^./][^/]*)+)$`),
		ShapeText: "/ or an absolute path whose components do not start with .",
		MaxDepth:  4,
		Ref:       "EFS API Reference, RootDirectory, Path",
	}
	// Secrets Manager API Reference, CreateSecret, Name: "ASCII letters,
	// numbers, and the following characters: /_+=.@-"; length 1 to 512
	// (the length as the brief gives it: not shown by the search tool).
	SecretName = Rule{
		What: "Secrets Manager secret name", Type: TypeSecret, Input: "name", Field: "CreateSecret Name",
		Min: 1, Max: 512, Chars: chars(`A-Za-z0-9/_+=.@-`), Allowed: "ASCII letters, digits and /_+=.@-",
		Ref: "Secrets Manager API Reference, CreateSecret, Name",
	}
)

// ECS API Reference, HealthCheck: "interval ... between 5 and 300
// seconds", "timeout ... between 2 and 60 seconds", "retries ... between 1
// and 10", "startPeriod ... between 0 and 300 seconds" (verified as the CDK
// docs quote it).
var (
	HealthCheckInterval = Range{What: "ECS health check interval", Type: TypeTaskDefinition, Input: "containerDefinitions[].healthCheck.interval", Field: "HealthCheck interval",
		Min: 5, Max: 300, Unit: "seconds", Ref: "ECS API Reference, HealthCheck, interval"}
	HealthCheckTimeout = Range{What: "ECS health check timeout", Type: TypeTaskDefinition, Input: "containerDefinitions[].healthCheck.timeout", Field: "HealthCheck timeout",
		Min: 2, Max: 60, Unit: "seconds", Ref: "ECS API Reference, HealthCheck, timeout"}
	HealthCheckRetries = Range{What: "ECS health check retries", Type: TypeTaskDefinition, Input: "containerDefinitions[].healthCheck.retries", Field: "HealthCheck retries",
		Min: 1, Max: 10, Ref: "ECS API Reference, HealthCheck, retries"}
	HealthCheckStartPeriod = Range{What: "ECS health check start period", Type: TypeTaskDefinition, Input: "containerDefinitions[].healthCheck.startPeriod", Field: "HealthCheck startPeriod",
		Min: 0, Max: 300, Unit: "seconds", Ref: "ECS API Reference, HealthCheck, startPeriod"}
)

// Rules lists every string rule of the table.
func Rules() []Rule {
	return []Rule{
		SecurityGroupName, SecurityGroupDescription, SecurityGroupRuleDescription,
		IAMRoleName, IAMRoleNamePrefix, IAMRoleDescription, IAMRolePolicyName,
		ECSTaskFamily, ECSContainerName, ECSServiceName, ECSClusterName,
		CloudMapServiceName, CloudMapNamespaceName, LogGroupName, DashboardName,
		TagKey, TagValue, ECRRepositoryName, EFSAccessPointPath, SecretName,
	}
}

// Ranges lists every numeric rule of the table.
func Ranges() []Range {
	return []Range{HealthCheckInterval, HealthCheckTimeout, HealthCheckRetries, HealthCheckStartPeriod}
}
