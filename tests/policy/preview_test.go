package policy_test

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

var computed = resource.MakeComputed(resource.NewStringProperty(""))

// previewOfNewStack marks what a preview of a stack that does not exist yet
// cannot know: the outputs of other resources (image digests, network names,
// container IDs in triggers, access point and security group IDs).
func previewOfNewStack(rs []capture.Resource) []capture.Resource {
	for i, r := range rs {
		in := r.Inputs
		switch r.Type {
		case rules.TypeContainer:
			in["image"] = computed
			if nets, ok := in["networksAdvanced"]; ok && nets.IsArray() {
				for _, n := range nets.ArrayValue() {
					n.ObjectValue()["name"] = computed
				}
			}
		case rules.TypeCommand:
			if _, ok := in["triggers"]; ok {
				in["triggers"] = computed
			}
		case awsrules.TypeTaskDefinition:
			in["containerDefinitions"] = computed
			in["volumes"] = computed
			delete(in, "arn")
		case awsrules.TypeService:
			in["taskDefinition"] = computed
			if nc, ok := in["networkConfiguration"]; ok && nc.IsObject() {
				nc.ObjectValue()["securityGroups"] = computed
			}
		case awsrules.TypeAccessPoint, awsrules.TypeSecurityGroup:
			delete(in, "id")
		case awsrules.TypeSGIngressRule, awsrules.TypeSecurityGroupRule:
			in["securityGroupId"] = computed
		}
		rs[i].Inputs = in
	}
	return rs
}

// TestPreviewOfNewStack: values a preview cannot know yet make no rule fire
// (`pulumi up` checks them once known), and they hide nothing else.
func TestPreviewOfNewStack(t *testing.T) {
	for _, s := range []struct {
		stack string
		rs    []capture.Resource
	}{{"dev", dev(t, 3)}, {"aws", awsStack(3)}, {"aws", awsCapture(t, 3)}} {
		if vs := check(s.stack, previewOfNewStack(s.rs)); len(vs) > 0 {
			t.Errorf("%s: unknown values make the pack report:%s", s.stack, messages(vs))
		}
	}
	for _, c := range breakCases() {
		rs := previewOfNewStack(c.build(t))
		vs := check(c.stack, rs)
		got := policyNames(vs)
		if len(got) > 1 || (len(got) == 1 && got[0] != c.policy) {
			t.Errorf("%s in preview: policies reporting %v:%s", c.name(), got, messages(vs))
		}
	}
	// A known violation still shows next to unknown values.
	rs := previewOfNewStack(edit(t, dev(t, 3), rules.TypeContainer, agent1, func(in map[string]any) { in["readOnly"] = false }))
	if got := policyNames(check("dev", rs)); len(got) != 1 || got[0] != "container-read-only-rootfs" {
		t.Errorf("a writable root next to unknown values: policies reporting %v", got)
	}
}

// TestProviderDefaults: the engine hands policies the inputs after the
// provider's Check, which fills in schema defaults (pulumi-docker: networkMode
// "bridge", logDriver, restart, ...) and lists them under __defaults. The
// dev stack still passes: a container with networksAdvanced is moved off the
// default bridge by the provider.
func TestProviderDefaults(t *testing.T) {
	rs := dev(t, 3)
	for _, r := range rs {
		if r.Type != rules.TypeContainer {
			continue
		}
		rs = edit(t, rs, r.Type, r.Name, func(in map[string]any) {
			in["networkMode"] = "bridge"
			in["attach"], in["rm"], in["start"], in["publishAllPorts"] = false, false, true, false
			in["__defaults"] = []any{"attach", "networkMode", "publishAllPorts", "rm", "start"}
		})
	}
	if vs := check("dev", rs); len(vs) > 0 {
		t.Errorf("provider defaults make the pack report:%s", messages(vs))
	}
}
