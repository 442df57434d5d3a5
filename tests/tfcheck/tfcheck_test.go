package tfcheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/cloudwatch"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ec2"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecr"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/ecs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/efs"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/iam"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/route53"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/secretsmanager"
	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws/servicediscovery"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
	"github.com/ai-flock/ai-flock/tests/tfcheck"
)

var (
	tfOnce sync.Once
	tf     *tfcheck.Terraform
	tfErr  error
)

// terraform is the working directory every test plans from: terraform and
// the provider are required under FLOCK_REQUIRE_TERRAFORM=1 (CI), and the
// tests skip, saying why, without them elsewhere.
func terraform(t *testing.T) (*tfcheck.Terraform, *tfcheck.Schema) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make test): the provider's plans are make check's")
	}
	tfOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tfcheck-")
		if err != nil {
			tfErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		tf, tfErr = tfcheck.New(ctx, dir)
	})
	if tfErr != nil {
		if errors.Is(tfErr, tfcheck.ErrNoTerraform) && os.Getenv("FLOCK_REQUIRE_TERRAFORM") != "1" {
			t.Skipf("%v (FLOCK_REQUIRE_TERRAFORM=1 makes this a failure; the README says how to get both)", tfErr)
		}
		t.Fatal(tfErr)
	}
	s, err := tf.Schema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return tf, s
}

// shapes are the aws stack as the layer plans it: the default config (a
// three-node bus) and a three-node bus with the model gateway on and egress
// rules (a credential the gateway injects, a port besides 443, plain HTTP:
// their secrets, security group rules and DNS firewall list).
func shapes(t *testing.T) map[string]*capture.Stack {
	t.Helper()
	out := map[string]*capture.Stack{}
	for name, cfg := range map[string]capture.Config{
		"default": {},
		"gateway": {"flock:gateway": `{"upstreams": {"anthropic": {}}, "budgetTokens": 5000, "egress": [
			{"preset": "github", "agents": ["agent-1"], "credential": {"basicUser": "x-access-token", "secret": "githubToken"}},
			{"host": "registry.example.com", "port": 8443}, {"host": "mirror.example.org", "plainHttp": true}]}`,
			"flock:anthropicApiKey": "sk-ant-test-only", "flock:githubToken": "ghp-test-only"},
	} {
		s, err := capture.RunStack("aws", cfg, "flock:anthropicApiKey", "flock:githubToken")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

func plan(t *testing.T, tf *tfcheck.Terraform, name string, cfg tfcheck.Config) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	refusals, out, err := tf.Plan(ctx, name, capture.MockRegion, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if refusals == nil && !strings.Contains(out, "Plan:") {
		t.Fatalf("%s: terraform planned nothing:\n%s", name, out)
	}
	return refusals
}

// Every aws resource of both shapes, planned by the provider twice: as
// preview sees it (another resource's outputs unknown) and as apply does
// (every value known): the provider refuses nothing.
func TestTheProviderAcceptsTheAWSStack(t *testing.T) {
	tf, schema := terraform(t)
	for shape, s := range shapes(t) {
		for _, mode := range []struct {
			name string
			mode tfcheck.Mode
		}{{"preview", tfcheck.Preview}, {"apply", tfcheck.Apply}} {
			t.Run(shape+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				cfg, _, err := tfcheck.Convert(s, schema, mode.mode)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for typ, rs := range cfg {
					if typ != "terraform_data" {
						n += len(rs)
					}
				}
				if aws := countAWS(s); n != aws {
					t.Fatalf("%d resources converted of the stack's %d aws resources", n, aws)
				}
				for _, r := range plan(t, tf, shape+"-"+mode.name, cfg) {
					t.Errorf("terraform-provider-aws %s refuses: %s", tfcheck.ProviderVersion, r)
				}
				t.Logf("%s, %s: %d aws resources planned by terraform-provider-aws %s", shape, mode.name, n, tfcheck.ProviderVersion)
			})
		}
	}
}

func countAWS(s *capture.Stack) int {
	n := 0
	for _, r := range s.Resources {
		if strings.HasPrefix(r.Type, "aws:") {
			n++
		}
	}
	return n
}

// Under preview another resource's ID or ARN is a reference, unknown
// until it exists, never the mocks' made-up value.
func TestPreviewReferencesAreUnknown(t *testing.T) {
	_, schema := terraform(t)
	s := shapes(t)["default"]
	cfg, names, err := tfcheck.Convert(s, schema, tfcheck.Preview)
	if err != nil {
		t.Fatal(err)
	}
	var sg capture.Resource
	for _, r := range s.Resources {
		if r.Type == "aws:ec2/securityGroupRule:SecurityGroupRule" && sg.Name == "" {
			sg = r
		}
	}
	if sg.Name == "" {
		t.Fatal("the stack has no security group rule: the test looks at the wrong stack")
	}
	body := func(r capture.Resource) map[string]any {
		typ, n, _ := strings.Cut(names[r.Type+"::"+r.Name], ".")
		return cfg[typ][n].(map[string]any)
	}
	got, _ := body(sg)["security_group_id"].(string)
	if !strings.HasPrefix(got, "${aws_security_group.") || !strings.HasSuffix(got, ".id}") {
		t.Errorf("rule %s: security_group_id %q, want a reference to the group's id", sg.Name, got)
	}
	// A policy naming another resource's ARN names it by reference.
	refs := 0
	for _, r := range s.Resources {
		if r.Type == "aws:iam/rolePolicy:RolePolicy" {
			if pol, _ := body(r)["policy"].(string); strings.Contains(pol, "${aws_") {
				refs++
			}
			if pol, _ := body(r)["policy"].(string); strings.Contains(pol, "arn:aws:secretsmanager:") {
				t.Errorf("role policy %s: a secret's mock ARN left in the policy, not a reference: %s", r.Name, pol)
			}
		}
	}
	if refs == 0 {
		t.Errorf("no role policy names another resource by reference")
	}
	for _, r := range s.Resources {
		if b, ok := cfg["aws_ecs_task_definition"]; ok && r.Type == "aws:ecs/taskDefinition:TaskDefinition" {
			_, n, _ := strings.Cut(names[r.Type+"::"+r.Name], ".")
			if defs := b[n].(map[string]any)["container_definitions"].(string); strings.Contains(defs, capture.MockAccount+":secret:") {
				t.Errorf("task definition %s: a secret's mock ARN left in the container definitions, not a reference", r.Name)
			}
		}
	}
}

// A broken copy of the stack, one rule class each: the layer fails it with
// the provider's own words, for the resource that breaks it.
func TestTheLayerCatchesABrokenCopy(t *testing.T) {
	tf, schema := terraform(t)
	s := shapes(t)["default"]
	type mutation struct {
		class, typ string
		set        func(resource.PropertyMap)
		want       string
	}
	mutations := []mutation{
		{"length", "aws:iam/role:Role", func(m resource.PropertyMap) { m["name"] = resource.NewStringProperty(strings.Repeat("r", 70)) }, "expected length of name to be in the range (1 - 64)"},
		{"pattern", "aws:ecs/taskDefinition:TaskDefinition", func(m resource.PropertyMap) { m["family"] = resource.NewStringProperty("flock agent") }, "invalid value for family"},
		{"one of", "aws:ecs/taskDefinition:TaskDefinition", func(m resource.PropertyMap) { m["networkMode"] = resource.NewStringProperty("mesh") }, "expected network_mode to be one of"},
		{"number in a set", "aws:cloudwatch/logGroup:LogGroup", func(m resource.PropertyMap) { m["retentionInDays"] = resource.NewNumberProperty(31) }, "expected retention_in_days to be one of"},
		{"container definitions", "aws:ecs/taskDefinition:TaskDefinition", func(m resource.PropertyMap) {
			m["containerDefinitions"] = resource.NewStringProperty(`[{"name":"agent","image":"x","cpu":"256","essential":true}]`)
		}, "container_definitions"},
		{"policy JSON", "aws:iam/rolePolicy:RolePolicy", func(m resource.PropertyMap) { m["policy"] = resource.NewStringProperty("allow everything") }, "invalid JSON"},
		{"type", "aws:ecs/service:Service", func(m resource.PropertyMap) { m["desiredCount"] = resource.NewStringProperty("many") }, `Inappropriate value for attribute "desired_count": a number is required`},
	}
	broken := &capture.Stack{Outputs: s.Outputs}
	hit := map[int]string{} // mutation → the resource it broke
	for _, r := range s.Resources {
		for i, mu := range mutations {
			if _, done := hit[i]; done || r.Type != mu.typ || slices.Contains(mapValues(hit), r.Name) {
				continue
			}
			r.Inputs = r.Inputs.Copy()
			mu.set(r.Inputs)
			hit[i] = r.Name
			break
		}
		broken.Resources = append(broken.Resources, r)
	}
	cfg, names, err := tfcheck.Convert(broken, schema, tfcheck.Apply)
	if err != nil {
		t.Fatal(err)
	}
	refusals := plan(t, tf, "broken", cfg)
	for i, mu := range mutations {
		name, ok := hit[i]
		if !ok {
			t.Errorf("%s: the stack has no %s to break", mu.class, mu.typ)
			continue
		}
		addr := names[mu.typ+"::"+name]
		found := ""
		for _, r := range refusals {
			if strings.Contains(r, mu.want) && strings.Contains(r, addr) {
				found = r
			}
		}
		if found == "" {
			t.Errorf("%s: %s %s broken, and the provider's refusals do not name it (%q): %s", mu.class, mu.typ, name, mu.want, strings.Join(refusals, "\n  "))
			continue
		}
		t.Logf("%s: %s", mu.class, found)
	}
}

func mapValues(m map[int]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// A type or an input the layer cannot map fails by name, never left out.
func TestAnUnmappedTypeOrInputFailsByName(t *testing.T) {
	_, schema := terraform(t)
	s := &capture.Stack{Resources: []capture.Resource{
		{Type: "aws:ec2/warpDrive:WarpDrive", Name: "drive", Custom: true, Inputs: resource.PropertyMap{}},
		{Type: "aws:cloudwatch/logGroup:LogGroup", Name: "logs", Custom: true, Inputs: resource.PropertyMap{
			"name": resource.NewStringProperty("logs"), "flux": resource.NewNumberProperty(1),
		}},
	}}
	_, _, err := tfcheck.Convert(s, schema, tfcheck.Apply)
	if err == nil || !strings.Contains(err.Error(), "aws:ec2/warpDrive:WarpDrive") || !strings.Contains(err.Error(), "logs.flux: no attribute or block flux") {
		t.Fatalf("an unmapped type and input: %v", err)
	}
}

// sdkArgs are the pulumi-aws Go SDK's own inputs of every type the stack
// declares: the mapping is checked against each property the SDK has.
var sdkArgs = map[string]reflect.Type{
	"aws:cloudwatch/dashboard:Dashboard":                                cloudwatch.DashboardArgs{}.ElementType(),
	"aws:cloudwatch/logGroup:LogGroup":                                  cloudwatch.LogGroupArgs{}.ElementType(),
	"aws:cloudwatch/metricAlarm:MetricAlarm":                            cloudwatch.MetricAlarmArgs{}.ElementType(),
	"aws:ec2/defaultSecurityGroup:DefaultSecurityGroup":                 ec2.DefaultSecurityGroupArgs{}.ElementType(),
	"aws:ec2/eip:Eip":                                                   ec2.EipArgs{}.ElementType(),
	"aws:ec2/internetGateway:InternetGateway":                           ec2.InternetGatewayArgs{}.ElementType(),
	"aws:ec2/natGateway:NatGateway":                                     ec2.NatGatewayArgs{}.ElementType(),
	"aws:ec2/route:Route":                                               ec2.RouteArgs{}.ElementType(),
	"aws:ec2/routeTable:RouteTable":                                     ec2.RouteTableArgs{}.ElementType(),
	"aws:ec2/routeTableAssociation:RouteTableAssociation":               ec2.RouteTableAssociationArgs{}.ElementType(),
	"aws:ec2/securityGroup:SecurityGroup":                               ec2.SecurityGroupArgs{}.ElementType(),
	"aws:ec2/securityGroupRule:SecurityGroupRule":                       ec2.SecurityGroupRuleArgs{}.ElementType(),
	"aws:ec2/subnet:Subnet":                                             ec2.SubnetArgs{}.ElementType(),
	"aws:ec2/vpc:Vpc":                                                   ec2.VpcArgs{}.ElementType(),
	"aws:ec2/vpcEndpoint:VpcEndpoint":                                   ec2.VpcEndpointArgs{}.ElementType(),
	"aws:ecr/lifecyclePolicy:LifecyclePolicy":                           ecr.LifecyclePolicyArgs{}.ElementType(),
	"aws:ecr/repository:Repository":                                     ecr.RepositoryArgs{}.ElementType(),
	"aws:ecs/cluster:Cluster":                                           ecs.ClusterArgs{}.ElementType(),
	"aws:ecs/service:Service":                                           ecs.ServiceArgs{}.ElementType(),
	"aws:ecs/taskDefinition:TaskDefinition":                             ecs.TaskDefinitionArgs{}.ElementType(),
	"aws:efs/accessPoint:AccessPoint":                                   efs.AccessPointArgs{}.ElementType(),
	"aws:efs/fileSystem:FileSystem":                                     efs.FileSystemArgs{}.ElementType(),
	"aws:efs/fileSystemPolicy:FileSystemPolicy":                         efs.FileSystemPolicyArgs{}.ElementType(),
	"aws:efs/mountTarget:MountTarget":                                   efs.MountTargetArgs{}.ElementType(),
	"aws:iam/role:Role":                                                 iam.RoleArgs{}.ElementType(),
	"aws:iam/rolePolicy:RolePolicy":                                     iam.RolePolicyArgs{}.ElementType(),
	"aws:iam/serviceLinkedRole:ServiceLinkedRole":                       iam.ServiceLinkedRoleArgs{}.ElementType(),
	"aws:secretsmanager/secret:Secret":                                  secretsmanager.SecretArgs{}.ElementType(),
	"aws:secretsmanager/secretVersion:SecretVersion":                    secretsmanager.SecretVersionArgs{}.ElementType(),
	"aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList": route53.ResolverFirewallDomainListArgs{}.ElementType(),
	"aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup":   route53.ResolverFirewallRuleGroupArgs{}.ElementType(),
	"aws:route53/resolverFirewallRule:ResolverFirewallRule":             route53.ResolverFirewallRuleArgs{}.ElementType(),
	"aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation": route53.ResolverFirewallRuleGroupAssociationArgs{}.ElementType(),
	"aws:route53/resolverFirewallConfig:ResolverFirewallConfig":                             route53.ResolverFirewallConfigArgs{}.ElementType(),
	"aws:servicediscovery/privateDnsNamespace:PrivateDnsNamespace":                          servicediscovery.PrivateDnsNamespaceArgs{}.ElementType(),
	"aws:servicediscovery/service:Service":                                                  servicediscovery.ServiceArgs{}.ElementType(),
}

// Every input the SDK has, for every type the stack declares, maps to an
// attribute or block of the provider's resource, all the way down.
func TestTheMappingCoversTheSDKsInputs(t *testing.T) {
	_, schema := terraform(t)
	seen := map[string]bool{}
	for _, s := range shapes(t) {
		for _, r := range s.Resources {
			if strings.HasPrefix(r.Type, "aws:") {
				seen[r.Type] = true
			}
		}
	}
	checked := 0
	for typ := range seen {
		args, ok := sdkArgs[typ]
		if !ok {
			t.Errorf("%s: declared by the stack, not in sdkArgs: add its SDK Args type", typ)
			continue
		}
		tfType, err := tfcheck.TFType(typ, schema)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, p := range unmapped(typ, args, tfcheck.Renamed(schema.Resources[tfType], typ)) {
			t.Errorf("%s (%s): the SDK's input %s maps to nothing in the provider's schema", typ, tfType, p)
		}
		checked += countFields(args)
	}
	if checked < 300 {
		t.Errorf("only %d SDK inputs checked", checked)
	}
	t.Logf("%d SDK inputs of %d types mapped to the provider's schema", checked, len(seen))
}

func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

func countFields(t reflect.Type) int {
	n := 0
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("pulumi"); tag != "" {
			n++
			if e := elem(t.Field(i).Type); e.Kind() == reflect.Struct {
				n += countFields(e)
			}
		}
	}
	return n
}

func unmapped(path string, t reflect.Type, b tfcheck.Block) []string {
	var bad []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("pulumi"), ",")
		if name == "" {
			continue
		}
		tf, attr, bt := b.Field(name)
		switch {
		case attr == nil && bt == nil:
			bad = append(bad, fmt.Sprintf("%s.%s", path, name))
		case bt != nil:
			if e := elem(f.Type); e.Kind() == reflect.Struct {
				bad = append(bad, unmapped(path+"."+name, e, bt.Block)...)
			}
		default:
			_ = tf
		}
	}
	return bad
}
