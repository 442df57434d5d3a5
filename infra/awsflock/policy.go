package awsflock

import (
	"encoding/json"
	"sort"
)

// PolicyDocument is an IAM policy (identity, trust or resource policy). The
// documents are built here, in plain Go, rather than with the
// iam.getPolicyDocument invoke: one invoke per agent would slow large flocks,
// and plain functions are easy to test.
type PolicyDocument struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a policy document.
type Statement struct {
	Sid       string                    `json:"Sid,omitempty"`
	Effect    string                    `json:"Effect"`
	Principal any                       `json:"Principal,omitempty"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource,omitempty"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

func (p PolicyDocument) String() string {
	b, err := json.Marshal(p)
	if err != nil { // only plain strings and maps: cannot fail
		panic(err)
	}
	return string(b)
}

func doc(st ...Statement) PolicyDocument { return PolicyDocument{Version: "2012-10-17", Statement: st} }

// Actions on the EFS client side (what a mount may do).
const (
	efsMount = "elasticfilesystem:ClientMount"
	efsWrite = "elasticfilesystem:ClientWrite"
	efsRoot  = "elasticfilesystem:ClientRootAccess"
	// APCondition is the condition key that ties an EFS client action to an access point.
	APCondition = "elasticfilesystem:AccessPointArn"
)

// ExecTrustPolicy lets ECS assume an execution role.
func ExecTrustPolicy() string {
	return doc(Statement{
		Effect: "Allow", Principal: map[string]any{"Service": "ecs-tasks.amazonaws.com"},
		Action: []string{"sts:AssumeRole"},
	}).String()
}

// TaskTrustPolicy lets ECS assume a task role for tasks of this account and
// region only (the confused-deputy conditions the ECS task-role guide gives).
func TaskTrustPolicy(partition, region, account string) string {
	return doc(Statement{
		Effect: "Allow", Principal: map[string]any{"Service": "ecs-tasks.amazonaws.com"},
		Action: []string{"sts:AssumeRole"},
		Condition: map[string]map[string]any{
			"StringEquals": {"aws:SourceAccount": account},
			"ArnLike":      {"aws:SourceArn": "arn:" + partition + ":ecs:" + region + ":" + account + ":*"},
		},
	}).String()
}

// ExecPolicy is everything one task's execution role may do: pull from the
// flock's repository, write its own log group, read its own secrets.
// ecr:GetAuthorizationToken has no resource-level permissions ("*" is the only form).
func ExecPolicy(repoARN, logGroupARN string, secretARNs []string) string {
	st := []Statement{
		{Sid: "RegistryLogin", Effect: "Allow", Action: []string{"ecr:GetAuthorizationToken"}, Resource: []string{"*"}},
		{Sid: "PullFlockImages", Effect: "Allow",
			Action:   []string{"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"},
			Resource: []string{repoARN}},
		{Sid: "WriteOwnLogs", Effect: "Allow",
			Action:   []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resource: []string{logGroupARN + ":log-stream:*"}},
	}
	if len(secretARNs) > 0 {
		s := append([]string(nil), secretARNs...)
		sort.Strings(s)
		st = append(st, Statement{Sid: "ReadOwnSecrets", Effect: "Allow", Action: []string{"secretsmanager:GetSecretValue"}, Resource: s})
	}
	return doc(st...).String()
}

// MountPolicy lets a task role mount the file system through the given access
// points only: read-write through rw, read-only (no ClientWrite) through ro.
// Mounting the file system itself, or any other access point, is not allowed.
func MountPolicy(fsARN string, rw, ro []string) string {
	var st []Statement
	if len(rw) > 0 {
		st = append(st, Statement{Sid: "OwnAccessPointsReadWrite", Effect: "Allow",
			Action: []string{efsMount, efsWrite}, Resource: []string{fsARN},
			Condition: map[string]map[string]any{"StringEquals": {APCondition: rw}}})
	}
	if len(ro) > 0 {
		st = append(st, Statement{Sid: "SharedAccessPointsReadOnly", Effect: "Allow",
			Action: []string{efsMount}, Resource: []string{fsARN},
			Condition: map[string]map[string]any{"StringEquals": {APCondition: ro}}})
	}
	return doc(st...).String()
}

// FileSystemPolicy is the EFS resource policy: no access without TLS, no
// mount except through an access point (the file system root, which holds
// every agent's directory, cannot be mounted), and no root access for anyone.
// It only denies: what a client may do comes from its task role.
func FileSystemPolicy(fsARN string) string {
	all := map[string]any{"AWS": "*"}
	return doc(
		Statement{Sid: "DenyWithoutTLS", Effect: "Deny", Principal: all, Action: []string{"*"}, Resource: []string{fsARN},
			Condition: map[string]map[string]any{"Bool": {"aws:SecureTransport": "false"}}},
		Statement{Sid: "DenyWithoutAccessPoint", Effect: "Deny", Principal: all, Action: []string{efsMount, efsWrite, efsRoot}, Resource: []string{fsARN},
			Condition: map[string]map[string]any{"Null": {APCondition: "true"}}},
		Statement{Sid: "DenyRootAccess", Effect: "Deny", Principal: all, Action: []string{efsRoot}, Resource: []string{fsARN}},
	).String()
}

// OwnAccountEndpointPolicy is every interface endpoint's policy: callers of
// this account only. Without it an endpoint takes AWS's default policy,
// full access for anyone: a program in a task with another account's keys
// could write that account's logs, registry or secrets through the
// endpoints the tasks reach, a way out of the VPC.
func OwnAccountEndpointPolicy(account string) string {
	return doc(Statement{Sid: "ThisAccountOnly", Effect: "Allow", Principal: "*",
		Action: []string{"*"}, Resource: []string{"*"},
		Condition: map[string]map[string]any{"StringEquals": {"aws:PrincipalAccount": account}},
	}).String()
}

// ECRLayerBucketPolicy is the S3 gateway endpoint's policy: ECR image layers
// (AWS's starport layer bucket of the region) and nothing else, so the
// endpoint is no route to arbitrary buckets.
func ECRLayerBucketPolicy(partition, region string) string {
	return doc(Statement{Sid: "ECRLayersOnly", Effect: "Allow", Principal: "*",
		Action:   []string{"s3:GetObject"},
		Resource: []string{"arn:" + partition + ":s3:::prod-" + region + "-starport-layer-bucket/*"},
	}).String()
}
