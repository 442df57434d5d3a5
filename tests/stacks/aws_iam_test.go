package stacks_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's invariants (TestAWSStackInvariants, aws_test.go): IAM, images, secrets and tags.

// 5. Execution roles: pull, their own log group, their own secrets. Task
// roles: mount their own access points (a condition on the access point ARN)
// and common read-only. A cluster's bus nodes mount nothing: their task
// roles have no policy at all.
func checkAWSIAM(t *testing.T, s *capture.Stack, ids []string, b awsBus) {
	repo := awsGet(t, s, awsrules.TypeRepository, "flock-images").MockARN()
	fsARN := awsGet(t, s, awsrules.TypeFileSystem, "flock-efs").MockARN()
	common := awsGet(t, s, awsrules.TypeAccessPoint, "flock-common-ap").MockARN()
	for _, r := range s.ByType(awsrules.TypeRole) {
		if len(list(r, "managedPolicyArns")) > 0 || len(list(r, "inlinePolicies")) > 0 {
			t.Errorf("%s: attaches policies besides its one role policy", r.Name)
		}
		trust := awsPolicy(t, r, "assumeRolePolicy")
		if len(trust.Statement) != 1 || !reflect.DeepEqual(trust.Statement[0].Principal, map[string]any{"Service": "ecs-tasks.amazonaws.com"}) {
			t.Errorf("%s: trust %+v: want ECS tasks only", r.Name, trust)
		}
		if strings.HasSuffix(r.Name, "-task-role") && trust.Statement[0].Condition["StringEquals"]["aws:SourceAccount"] != capture.MockAccount {
			t.Errorf("%s: trust lacks the source-account condition", r.Name)
		}
	}
	type want struct {
		secrets []string
		rw, ro  []string
	}
	wants := map[string]want{
		"operator": {[]string{awsGet(t, s, awsrules.TypeSecret, "flock-operator-nkey").MockARN()}, []string{awsGet(t, s, awsrules.TypeAccessPoint, "flock-common-writer-ap").MockARN()}, nil},
		// The flock's services read their seed, and mount nothing: their
		// task role is granted nothing.
		"services": {[]string{awsGet(t, s, awsrules.TypeSecret, "flock-services-nkey").MockARN()}, nil, nil},
	}
	for _, k := range b.keys() {
		var w want
		if b.nodes == 1 {
			w.rw = []string{awsGet(t, s, awsrules.TypeAccessPoint, "flock-bus-ap").MockARN()}
		}
		for _, sec := range s.ByType(awsrules.TypeSecret) {
			if strings.HasPrefix(sec.Name, "flock-"+k+"-config-") || strings.HasPrefix(sec.Name, "flock-"+k+"-topology-") {
				w.secrets = append(w.secrets, sec.MockARN())
			}
		}
		if len(w.secrets) < 2 {
			t.Errorf("%s has %d config secrets, want its config and topology", k, len(w.secrets))
		}
		wants[k] = w
	}
	for _, id := range ids {
		wants[id] = want{
			[]string{awsGet(t, s, awsrules.TypeSecret, "flock-"+id+"-nkey").MockARN()},
			[]string{awsGet(t, s, awsrules.TypeAccessPoint, "flock-"+id+"-dir-ap").MockARN(), awsGet(t, s, awsrules.TypeAccessPoint, "flock-"+id+"-log-ap").MockARN()},
			[]string{common},
		}
	}
	policies := 0
	for _, w := range wants {
		policies++ // execution
		if len(w.rw)+len(w.ro) > 0 {
			policies++ // task
		}
	}
	if n := len(s.ByType(awsrules.TypeRolePolicy)); n != policies {
		t.Errorf("%d role policies, want an execution policy for each of %d tasks and a task policy for each that mounts EFS (%d)", n, len(wants), policies)
	}
	for key, w := range wants {
		ep := awsGet(t, s, awsrules.TypeRolePolicy, "flock-"+key+"-exec-policy")
		if ep.String("role") != capture.MockID("flock-"+key+"-exec-role") {
			t.Errorf("%s: execution policy on %s", key, ep.String("role"))
		}
		lg := awsGet(t, s, awsrules.TypeLogGroup, "flock-"+key+"-logs").MockARN()
		granted := map[string][]string{}
		for _, st := range awsPolicy(t, ep, "policy").Statement {
			if st.Effect != "Allow" || st.Condition != nil {
				t.Errorf("%s: execution statement %+v", key, st)
			}
			for _, a := range st.Action {
				granted[a] = append(granted[a], st.Resource...)
			}
		}
		sort.Strings(w.secrets)
		wantGrants := map[string][]string{
			"ecr:GetAuthorizationToken":       {"*"},
			"ecr:BatchCheckLayerAvailability": {repo}, "ecr:BatchGetImage": {repo}, "ecr:GetDownloadUrlForLayer": {repo},
			"logs:CreateLogStream": {lg + ":log-stream:*"}, "logs:PutLogEvents": {lg + ":log-stream:*"},
			"secretsmanager:GetSecretValue": w.secrets,
		}
		if !reflect.DeepEqual(granted, wantGrants) {
			t.Errorf("%s: execution role grants\n got %v\nwant %v", key, granted, wantGrants)
		}

		if len(w.rw)+len(w.ro) == 0 {
			if _, ok := s.Get(awsrules.TypeRolePolicy, "flock-"+key+"-task-policy"); ok {
				t.Errorf("%s mounts nothing, yet its task role has a policy", key)
			}
			continue
		}
		tp := awsGet(t, s, awsrules.TypeRolePolicy, "flock-"+key+"-task-policy")
		if tp.String("role") != capture.MockID("flock-"+key+"-task-role") {
			t.Errorf("%s: task policy on %s", key, tp.String("role"))
		}
		var rw, ro []string
		for _, st := range awsPolicy(t, tp, "policy").Statement {
			aps := awsStrings(st.Condition["StringEquals"][awsflock.APCondition])
			if st.Effect != "Allow" || !reflect.DeepEqual(st.Resource, []string{fsARN}) || len(aps) == 0 || len(st.Condition) != 1 {
				t.Errorf("%s: task statement %+v: every grant must be on the file system and conditioned on access points", key, st)
				continue
			}
			switch {
			case reflect.DeepEqual(st.Action, []string{"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}):
				rw = append(rw, aps...)
			case reflect.DeepEqual(st.Action, []string{"elasticfilesystem:ClientMount"}):
				ro = append(ro, aps...)
			default:
				t.Errorf("%s: task role may %v", key, st.Action)
			}
		}
		if !reflect.DeepEqual(rw, w.rw) || !reflect.DeepEqual(ro, w.ro) {
			t.Errorf("%s: task role mounts rw %v ro %v, want rw %v ro %v", key, rw, ro, w.rw, w.ro)
		}
	}
}

// 6. ECR: scan on push, immutable tags; both images built and pushed with
// ECR's token (a secret), tasks pinned to the pushed digest.
func checkAWSImages(t *testing.T, s *capture.Stack) {
	repo := awsGet(t, s, awsrules.TypeRepository, "flock-images")
	if repo.String("imageTagMutability") != "IMMUTABLE" || obj(repo, "imageScanningConfiguration")["scanOnPush"] != true {
		t.Errorf("repository %v: want immutable tags and scan on push", repo.Inputs)
	}
	url := capture.MockRegistry() + "/flock-images"
	for _, target := range []string{"agent", "bus"} {
		img := awsGet(t, s, capture.TypeImage, "flock-"+target+"-image")
		reg := img.Inputs["registry"].ObjectValue()
		if !strings.HasPrefix(img.String("imageName"), url+":"+target+"-c") || boolean(img, "skipPush") {
			t.Errorf("%s image %q: want a pushed content tag in %s", target, img.String("imageName"), url)
		}
		if reg["server"].StringValue() != url || reg["username"].StringValue() != "AWS" || !reg["password"].IsSecret() {
			t.Errorf("%s image registry %v: want ECR's token, the password a secret", target, reg)
		}
		if b := obj(img, "build"); b["target"] != target || b["platform"] != "linux/amd64" {
			t.Errorf("%s image build %v", target, b)
		}
	}
	for _, td := range s.ByType(awsrules.TypeTaskDefinition) {
		c := awsContainer(t, td)
		target := "agent"
		// The flock's services run from the bus image (/flock-services).
		if role := obj(td, "tags")["ai-flock.role"]; role == "bus" || role == awsflock.RoleServices {
			target = "bus"
		}
		if c.Image != url+"@"+capture.MockDigest("flock-"+target+"-image") {
			t.Errorf("%s runs %q, want the pushed %s digest", td.Name, c.Image, target)
		}
	}
}

// plainSeeds finds nkey seeds outside Pulumi secrets.
func awsPlainSeeds(v resource.PropertyValue, path string, out *[]string) {
	switch {
	case v.IsSecret():
	case v.IsOutput():
		if o := v.OutputValue(); !o.Secret {
			awsPlainSeeds(o.Element, path, out)
		}
	case v.IsString():
		if awsSeedPattern.MatchString(v.StringValue()) {
			*out = append(*out, path)
		}
	case v.IsArray():
		for i, e := range v.ArrayValue() {
			awsPlainSeeds(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	case v.IsObject():
		for k, e := range v.ObjectValue() {
			awsPlainSeeds(e, path+"."+string(k), out)
		}
	}
}

// Credentials: each agent's seed is in its own secret, as a Pulumi secret;
// no seed appears in plain text in any input or output.
func checkAWSSecrets(t *testing.T, s *capture.Stack, ids []string) {
	for _, id := range ids {
		v := awsGet(t, s, awsrules.TypeSecretVersion, "flock-"+id+"-nkey")
		key, _ := credentials.Derive([]byte(capture.TestSecret), protocol.AgentUser(id))
		if !v.Inputs["secretString"].IsSecret() || v.String("secretString") != key.Seed {
			t.Errorf("%s: secret value is not its seed held as a Pulumi secret", id)
		}
		if v.String("secretId") != capture.MockID("flock-"+id+"-nkey") {
			t.Errorf("%s: seed stored in %s", id, v.String("secretId"))
		}
	}
	var leaks []string
	for _, r := range s.Resources {
		if r.Type == capture.TypeStack {
			continue
		}
		awsPlainSeeds(resource.NewObjectProperty(r.Inputs), r.Type+" "+r.Name, &leaks)
	}
	for name, o := range s.Outputs {
		if !o.Secret && awsSeedPattern.MatchString(fmt.Sprint(o.Value)) {
			leaks = append(leaks, "output "+name)
		}
	}
	if len(leaks) != 0 {
		t.Errorf("nkey seeds in plain text: %v", leaks)
	}
	if !s.Outputs["operatorSeed"].Secret {
		t.Error("operatorSeed is not a secret output")
	}
}

// Tags: the policy pack reads the docker labels' keys on aws resources.
func checkAWSTags(t *testing.T, s *capture.Stack, ids []string) {
	for _, typ := range []string{awsrules.TypeTaskDefinition, awsrules.TypeService, awsrules.TypeSecurityGroup, awsrules.TypeAccessPoint, awsrules.TypeRole, awsrules.TypeSecret, awsrules.TypeLogGroup} {
		for _, r := range s.ByType(typ) {
			tags := obj(r, "tags")
			if tags["ai-flock.flock"] != "flock" || tags["ai-flock.role"] == nil {
				t.Errorf("%s %s: tags %v", typ, r.Name, tags)
			}
			for _, id := range ids {
				if strings.HasPrefix(r.Name, "flock-"+id+"-") || r.Name == "flock-"+id {
					if tags["ai-flock.agent"] != id || tags["ai-flock.role"] != "agent" {
						t.Errorf("%s %s: tags %v, want agent %s", typ, r.Name, tags, id)
					}
				}
			}
		}
	}
	if tags := obj(awsGet(t, s, awsrules.TypeSecurityGroup, "flock-agents-sg"), "tags"); tags["ai-flock.role"] != "agent" {
		t.Errorf("the agents' group is tagged %v", tags)
	}
}
