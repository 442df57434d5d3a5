package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/policy/rules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// assertClean runs the whole pack over a stack, expects no violation, and
// returns how many resources each resource policy inspected.
func assertClean(t *testing.T, stack string, rs []capture.Resource) map[string]int {
	t.Helper()
	if vs := check(stack, rs); len(vs) > 0 {
		t.Errorf("the pack reports %d violations on the %s stack:%s", len(vs), stack, messages(vs))
	}
	seen := map[string]int{}
	for _, r := range toRules(stack, rs) {
		for _, p := range rules.All() {
			if p.AppliesTo(r.Type) {
				seen[p.Name]++
			}
		}
	}
	return seen
}

// TestDevStackPasses: the dev stack as declared (3 agents, and 50) breaks no policy.
func TestDevStackPasses(t *testing.T) {
	for _, n := range []int{3, 50} {
		t.Run(fmt.Sprintf("%d agents", n), func(t *testing.T) {
			rs := dev(t, n)
			seen := assertClean(t, "dev", rs)
			// Not vacuous: every docker policy saw every agent container (and
			// the bus's, and the services').
			if got := seen["container-own-shared-dirs"]; got != n+2 {
				t.Errorf("container policies inspected %d containers, want %d", got, n+2)
			}
			if got := seen["network-agent-internal"]; got != n+2 {
				t.Errorf("network policies inspected %d networks, want %d", got, n+2)
			}
		})
	}
}

// TestDevGatewayStackPasses: with a gateway the dev stack breaks no policy,
// and the gateway's rules saw every agent and the egress network.
func TestDevGatewayStackPasses(t *testing.T) {
	rs := devGateway(t)
	seen := assertClean(t, "dev", rs)
	if got := seen["container-no-key-in-agent-env"]; got != 6 { // 3 agents, the bus, the services, the gateway
		t.Errorf("the key rule inspected %d containers, want 6", got)
	}
	rs = edit(t, rs, rules.TypeContainer, "flock-agent-1", func(in map[string]any) {
		in["networksAdvanced"] = []any{map[string]any{"name": "flock-egress"}}
	})
	if msg := messages(check("dev", rs)); !strings.Contains(msg, `puts agent agent-1 on the egress network "flock-egress"`) {
		t.Errorf("agent-1 on the egress network: want it refused, got:%s", msg)
	}
}

// TestGVisorDevStackPasses: under gVisor no step sets a PIDs limit (runsc
// takes no docker update; its own kernel enforces the nproc ulimit per
// sandbox) and the stack still breaks no policy; the same stack with one
// agent back on runc and no such step is refused.
func TestGVisorDevStackPasses(t *testing.T) {
	s, err := capture.RunDev(capture.Config{"flock:runtime": "runsc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Resources {
		if r.Type == rules.TypeCommand && strings.Contains(r.String("create"), "docker update") {
			t.Errorf("gVisor stack declares %s with docker update: runsc refuses it", r.Name)
		}
	}
	assertClean(t, "dev", s.Resources)
	rs := edit(t, clone(s.Resources), rules.TypeContainer, "flock-agent-2", func(in map[string]any) { in["runtime"] = "runc" })
	vs := check("dev", rs)
	if !strings.Contains(messages(vs), `no step sets the cgroup PIDs limit of agent agent-2's container`) {
		t.Errorf("agent-2 on runc without a pids-limit step: want it refused, got:%s", messages(vs))
	}
}

// TestAWSFixturePasses: the aws flock fixture (a correct aws stack, by hand,
// until the aws stack can be captured) breaks no policy.
func TestAWSFixturePasses(t *testing.T) {
	for _, n := range []int{3, 50} {
		t.Run(fmt.Sprintf("%d agents", n), func(t *testing.T) {
			seen := assertClean(t, "aws", awsStack(n))
			if got := seen["ecs-task-non-root-user"]; got != n+1 {
				t.Errorf("task definition policies inspected %d, want %d", got, n+1)
			}
		})
	}
}

// TestEveryResourcePolicyIsExercised: the clean runs above are not vacuous:
// every resource policy inspects at least one resource of the dev stack, the
// aws fixture or the captured aws stack.
func TestEveryResourcePolicyIsExercised(t *testing.T) {
	seen := map[string]int{}
	for _, s := range []struct {
		stack string
		rs    []capture.Resource
	}{{"dev", dev(t, 3)}, {"aws", awsStack(3)}, {"aws", awsCaptured(t)}} {
		for _, r := range toRules(s.stack, s.rs) {
			for _, p := range rules.All() {
				if p.AppliesTo(r.Type) {
					seen[p.Name]++
				}
			}
		}
	}
	for _, p := range rules.All() {
		if p.Resource != nil && seen[p.Name] == 0 {
			t.Errorf("%s inspects no resource of either stack: its types %v are never declared", p.Name, p.Types)
		}
	}
}
