package capture

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/awsrules"
)

// What the aws mocks answer: one account in one region.
const (
	MockAccount   = "123456789012"
	MockRegion    = "eu-west-1"
	MockPrefixS3  = "pl-6da54004"
	TypeAWSFlock  = "flock:aws:Flock"
	mockPartition = "aws"
)

// MockZones are the Availability Zones of the mock region.
var MockZones = []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}

// Zones the mock account sees besides MockZones (it opted in to them): a
// Local Zone and a Wavelength Zone, where neither Fargate nor EFS runs.
// DescribeAvailabilityZones lists zones by name, so they come first: a
// stack that does not filter on zone-type picks them.
var (
	MockLocalZone      = "eu-west-1-lcl-1a"
	MockWavelengthZone = "eu-west-1-wl1-dub-wlz-1"
)

// mockZone is a zone as DescribeAvailabilityZones describes it.
type mockZone struct{ name, id, kind string }

func mockRegionZones() []mockZone {
	zones := []mockZone{{MockLocalZone, "euw1-lcl1-az1", "local-zone"}, {MockWavelengthZone, "euw1-wl1-dub-wlz1", "wavelength-zone"}}
	for i, z := range MockZones {
		zones = append(zones, mockZone{z, fmt.Sprintf("euw1-az%d", i+1), "availability-zone"})
	}
	return zones
}

// MockSubnet is a subnet of an existing VPC the mocks know.
type MockSubnet struct{ VPC, Zone string }

// MockVPC is the existing VPC the tests name; MockSubnets its subnets (and
// others): one per Availability Zone, one more in eu-west-1a, one in the
// Local Zone, and one of another VPC.
const MockVPC = "vpc-0123456789abcdef0"

var MockSubnets = map[string]MockSubnet{
	"subnet-0aaaaaaaaaaaaaaaa": {MockVPC, "eu-west-1a"},
	"subnet-0bbbbbbbbbbbbbbbb": {MockVPC, "eu-west-1b"},
	"subnet-0cccccccccccccccc": {MockVPC, "eu-west-1c"},
	"subnet-0aaaaaaaaaaaaaaa2": {MockVPC, "eu-west-1a"},
	"subnet-0111111111111111e": {MockVPC, MockLocalZone},
	"subnet-0fffffffffffffff0": {"vpc-0fedcba9876543210", "eu-west-1b"},
}

func init() {
	next := CallMock
	CallMock = func(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
		if out, ok, err := awsInvoke(args); ok {
			return out, err
		}
		return next(args)
	}
	prev := ResourceMock
	ResourceMock = func(args pulumi.MockResourceArgs, state resource.PropertyMap) {
		if prev != nil {
			prev(args, state)
		}
		awsState(args, state)
	}
}

// RunAWS captures the aws stack as Pulumi.aws.yaml declares it, with the
// given keys overriding or adding to its config ("" removes a key).
func RunAWS(overrides Config) (*Stack, error) { return RunStack("aws", overrides) }

// MockID is the ID the mocks give the resource named name.
func MockID(name string) string { return name + "-id" }

func str(s string) resource.PropertyValue { return resource.NewStringProperty(s) }

// awsInvoke answers the aws provider functions the stack calls (ok false:
// not one of them); err is the provider's error.
func awsInvoke(args pulumi.MockCallArgs) (out resource.PropertyMap, ok bool, err error) {
	switch args.Token {
	case "aws:index/getCallerIdentity:getCallerIdentity":
		return resource.PropertyMap{
			"accountId": str(MockAccount), "id": str(MockAccount), "userId": str("AIDAMOCKUSER"),
			"arn": str("arn:aws:iam::" + MockAccount + ":user/mock"),
		}, true, nil
	case "aws:index/getRegion:getRegion":
		return resource.PropertyMap{
			"name": str(MockRegion), "id": str(MockRegion),
			"description": str("Europe (Ireland)"), "endpoint": str("ec2." + MockRegion + ".amazonaws.com"),
		}, true, nil
	case "aws:index/getPartition:getPartition":
		return resource.PropertyMap{
			"partition": str(mockPartition), "id": str(mockPartition),
			"dnsSuffix": str("amazonaws.com"), "reverseDnsPrefix": str("com.amazonaws"),
		}, true, nil
	case "aws:index/getAvailabilityZones:getAvailabilityZones":
		return mockAvailabilityZones(args.Args)
	case "aws:ec2/getSubnet:getSubnet":
		id := args.Args["id"]
		if !id.IsString() {
			return nil, true, fmt.Errorf("mock: getSubnet by id only")
		}
		sub, ok := MockSubnets[id.StringValue()]
		if !ok {
			return nil, true, fmt.Errorf("no matching EC2 Subnet found")
		}
		return resource.PropertyMap{
			"id": id, "vpcId": str(sub.VPC), "availabilityZone": str(sub.Zone), "state": str("available"),
			"arn": str("arn:aws:ec2:" + MockRegion + ":" + MockAccount + ":subnet/" + id.StringValue()),
		}, true, nil
	case "aws:ecr/getAuthorizationToken:getAuthorizationToken":
		return resource.PropertyMap{
			"authorizationToken": str(base64.StdEncoding.EncodeToString([]byte("AWS:mock-ecr-password"))),
			"userName":           str("AWS"), "password": str("mock-ecr-password"),
			"proxyEndpoint": str("https://" + MockRegistry()),
			"expiresAt":     str("2030-01-01T00:00:00Z"), "registryId": str(MockAccount), "id": str(MockRegion),
		}, true, nil
	}
	return nil, false, nil
}

// mockAvailabilityZones answers getAvailabilityZones as EC2 would: every
// zone the account sees (Local and Wavelength Zones first), less those the
// filters leave out (zone-type and zone-name; any other filter is a test's
// mistake). Every mock zone is available.
func mockAvailabilityZones(args resource.PropertyMap) (resource.PropertyMap, bool, error) {
	zones := mockRegionZones()
	if f, ok := args["filters"]; ok && f.IsArray() {
		for _, filter := range f.ArrayValue() {
			name := filter.ObjectValue()["name"].StringValue()
			var values []string
			for _, v := range filter.ObjectValue()["values"].ArrayValue() {
				values = append(values, v.StringValue())
			}
			var keep []mockZone
			for _, z := range zones {
				switch name {
				case "zone-type":
					if slices.Contains(values, z.kind) {
						keep = append(keep, z)
					}
				case "zone-name":
					if slices.Contains(values, z.name) {
						keep = append(keep, z)
					}
				default:
					return nil, true, fmt.Errorf("mock: no getAvailabilityZones filter %s", name)
				}
			}
			zones = keep
		}
	}
	var names, ids []resource.PropertyValue
	for _, z := range zones {
		names = append(names, str(z.name))
		ids = append(ids, str(z.id))
	}
	return resource.PropertyMap{
		"names": resource.NewArrayProperty(names), "zoneIds": resource.NewArrayProperty(ids),
		"groupNames": resource.NewArrayProperty([]resource.PropertyValue{str(MockRegion)}),
		"id":         str(MockRegion),
	}, true, nil
}

// MockRegistry is the ECR registry host of the mock account.
func MockRegistry() string { return MockAccount + ".dkr.ecr." + MockRegion + ".amazonaws.com" }

// nameOf is the resource's physical name: its "name" input, else its logical name.
func nameOf(name string, inputs resource.PropertyMap) string {
	if v, ok := inputs["name"]; ok && v.IsString() && v.StringValue() != "" {
		return v.StringValue()
	}
	return name
}

// MockARN is the ARN the mocks give a resource of type typ named name with
// these inputs (tests use it to check that a policy names that resource).
func MockARN(typ, name string, inputs resource.PropertyMap) string {
	ra := MockRegion + ":" + MockAccount
	id := MockID(name)
	switch typ {
	case awsrules.TypeFileSystem:
		return "arn:aws:elasticfilesystem:" + ra + ":file-system/" + id
	case awsrules.TypeAccessPoint:
		return "arn:aws:elasticfilesystem:" + ra + ":access-point/" + id
	case awsrules.TypeLogGroup:
		return "arn:aws:logs:" + ra + ":log-group:" + nameOf(name, inputs)
	case awsrules.TypeSecret:
		return "arn:aws:secretsmanager:" + ra + ":secret:" + name + "-AbCdEf"
	case awsrules.TypeRole:
		return "arn:aws:iam::" + MockAccount + ":role/" + nameOf(name, inputs)
	case awsrules.TypeServiceLinkedRole:
		// AWS names it after the service: ECS's is AWSServiceRoleForECS.
		return "arn:aws:iam::" + MockAccount + ":role/aws-service-role/ecs.amazonaws.com/AWSServiceRoleForECS"
	case awsrules.TypeRepository:
		return "arn:aws:ecr:" + ra + ":repository/" + nameOf(name, inputs)
	case awsrules.TypeCluster:
		return "arn:aws:ecs:" + ra + ":cluster/" + nameOf(name, inputs)
	case awsrules.TypeTaskDefinition:
		return "arn:aws:ecs:" + ra + ":task-definition/" + familyOf(name, inputs) + ":1"
	case awsrules.TypeService:
		return "arn:aws:ecs:" + ra + ":service/" + nameOf(name, inputs)
	case awsrules.TypeDiscoveryService:
		return "arn:aws:servicediscovery:" + ra + ":service/srv-" + id
	case awsrules.TypeNamespace:
		return "arn:aws:servicediscovery:" + ra + ":namespace/ns-" + id
	}
	mod := strings.SplitN(strings.TrimPrefix(typ, "aws:"), "/", 2)[0]
	return "arn:aws:" + mod + ":" + ra + ":" + id
}

func familyOf(name string, inputs resource.PropertyMap) string {
	if v, ok := inputs["family"]; ok && v.IsString() {
		return v.StringValue()
	}
	return name
}

// MockARN of a captured resource.
func (r Resource) MockARN() string { return MockARN(r.Type, r.Name, r.Inputs) }

// awsState adds the outputs AWS computes that the program reads.
func awsState(args pulumi.MockResourceArgs, state resource.PropertyMap) {
	typ, name := args.TypeToken, args.Name
	if typ == TypeImage {
		// A pushed image's repoDigest is <repository>@sha256:<digest>.
		if reg, ok := args.Inputs["registry"]; ok && reg.IsObject() {
			img := args.Inputs["imageName"]
			if img.IsString() {
				repo := img.StringValue()
				if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
					repo = repo[:i]
				}
				state["repoDigest"] = str(repo + "@" + MockDigest(name))
			}
		}
		return
	}
	if !strings.HasPrefix(typ, "aws:") {
		return
	}
	if _, ok := state["arn"]; !ok {
		state["arn"] = str(MockARN(typ, name, args.Inputs))
	}
	switch typ {
	case awsrules.TypeRepository:
		repo := nameOf(name, args.Inputs)
		state["name"] = str(repo)
		state["registryId"] = str(MockAccount)
		state["repositoryUrl"] = str(MockRegistry() + "/" + repo)
	case awsrules.TypeRole, awsrules.TypeCluster, awsrules.TypeSecret:
		state["name"] = str(nameOf(name, args.Inputs))
	case awsrules.TypeServiceLinkedRole:
		state["name"] = str("AWSServiceRoleForECS")
		state["path"] = str("/aws-service-role/ecs.amazonaws.com/")
	case awsrules.TypeTaskDefinition:
		state["revision"] = resource.NewNumberProperty(1)
		state["arnWithoutRevision"] = str(strings.TrimSuffix(MockARN(typ, name, args.Inputs), ":1"))
	case awsrules.TypeVpcEndpoint:
		if t := args.Inputs["vpcEndpointType"]; t.IsString() && t.StringValue() == "Gateway" {
			state["prefixListId"] = str(MockPrefixS3)
		}
	case awsrules.TypeFileSystem:
		state["dnsName"] = str(MockID(name) + ".efs." + MockRegion + ".amazonaws.com")
	case awsrules.TypeNamespace:
		sum := sha256.Sum256([]byte(name))
		state["hostedZone"] = str("Z" + strings.ToUpper(hex.EncodeToString(sum[:]))[:20])
	}
}

// Computed is one output the mocks give a resource.
type Computed struct{ Name, Value string }

// AWSComputedOutputs are the string outputs the mocks give an aws resource
// that AWS computes (its ARN, a repository's URL, a file system's DNS
// name…), not those that echo an input (a role's name).
func AWSComputedOutputs(r Resource) []Computed {
	state := resource.PropertyMap{}
	awsState(pulumi.MockResourceArgs{TypeToken: r.Type, Name: r.Name, Inputs: r.Inputs}, state)
	var out []Computed
	for _, k := range state.StableKeys() {
		if _, echoed := r.Inputs[k]; echoed || k == "name" || !state[k].IsString() {
			continue
		}
		out = append(out, Computed{string(k), state[k].StringValue()})
	}
	return out
}
