package stacks_test

import (
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// flock:aws.createServiceLinkedRole: off by default (an account that has
// ECS's service-linked role refuses a second); set, the stack declares it
// for ecs.amazonaws.com and every ECS service waits for it.
func TestAWSServiceLinkedRole(t *testing.T) {
	if r := awsStack(t, capture.Config{}).ByType(awsrules.TypeServiceLinkedRole); len(r) != 0 {
		t.Errorf("declared by default: %s", r[0].Name)
	}
	for _, cfg := range []capture.Config{
		{"flock:aws": `{"createServiceLinkedRole": true}`},
		{"flock:aws": `{"createServiceLinkedRole": true}`, "flock:bus": `{"replicas": 1}`},
	} {
		s := awsStack(t, cfg)
		slrs := s.ByType(awsrules.TypeServiceLinkedRole)
		if len(slrs) != 1 {
			t.Fatalf("%v: %d service-linked roles, want 1", cfg, len(slrs))
		}
		slr := slrs[0]
		if slr.Name != "flock-ecs-service-linked-role" || slr.String("awsServiceName") != "ecs.amazonaws.com" {
			t.Errorf("%s for %q, want flock-ecs-service-linked-role for ecs.amazonaws.com", slr.Name, slr.String("awsServiceName"))
		}
		services := s.ByType(awsrules.TypeService)
		if len(services) < 4 {
			t.Fatalf("%d services", len(services))
		}
		for _, svc := range services {
			if !dependsOn(svc, slr) {
				t.Errorf("service %s does not wait for the service-linked role", svc.Name)
			}
		}
	}
	if r := awsStack(t, capture.Config{"flock:aws": `{"createServiceLinkedRole": false}`}).ByType(awsrules.TypeServiceLinkedRole); len(r) != 0 {
		t.Errorf("declared when set to false")
	}
}
