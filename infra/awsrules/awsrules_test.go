package awsrules

import (
	"errors"
	"strings"
	"testing"
)

// edge is a rule's boundary: values just inside it and just outside.
type edge struct {
	inside  []string
	outside []string
}

// upTo is e for a rule whose values are at most n characters, none empty:
// n characters inside, n+1 and none outside.
func (e edge) upTo(n int) edge {
	return edge{
		inside:  append([]string{at(n, "a")}, e.inside...),
		outside: append([]string{at(n+1, "a"), ""}, e.outside...),
	}
}

// at builds a value of exactly n characters from unit, repeated.
func at(n int, unit string) string { return strings.Repeat(unit, n) }

// edges feeds every rule of the table a value just inside and just outside
// each of its limits: the exact maximum length and one over (the minimum
// and one under), an allowed character and a forbidden one, and the shape.
func edges() map[string]edge {
	ec2 := edge{
		inside:  []string{"AI Flock EFS: NFS 2049 from the flock tasks", "a-z A-Z 0-9 ._-:/()#,@[]+=&;{}!$*"},
		outside: []string{"from the flock's tasks", `a"b`, "a\tb", "é"},
	}
	iam := edge{inside: []string{"a_b+c=d,e.f@g-h"}, outside: []string{"a b", "a/b", "a:b", "a*b"}}
	ecs := edge{inside: []string{"Flock_agent-1"}, outside: []string{"a.b", "a b", "a/b", "a:b"}}
	return map[string]edge{
		SecurityGroupName.What: {
			inside:  append([]string{at(255, "a"), "a"}, ec2.inside...),
			outside: append([]string{at(256, "a"), "", "sg-1", "SG-agents"}, ec2.outside...),
		},
		SecurityGroupDescription.What: {
			inside:  append([]string{at(255, "a"), ""}, ec2.inside...),
			outside: append([]string{at(256, "a")}, ec2.outside...),
		},
		SecurityGroupRuleDescription.What: {
			inside:  append([]string{at(255, "a"), ""}, ec2.inside...),
			outside: append([]string{at(256, "a")}, ec2.outside...),
		},
		IAMRoleName.What: {
			inside:  append([]string{at(64, "a"), "a"}, iam.inside...),
			outside: append([]string{at(65, "a"), ""}, iam.outside...),
		},
		IAMRoleNamePrefix.What: iam.upTo(38),
		IAMRoleDescription.What: {
			inside:  []string{at(1000, "a"), "", "tab\there, line\nfeed, ¡ÿ, ~", "AI Flock f agent-1: pull its image"},
			outside: []string{at(1001, "a"), "\x7f", "\u00a0", "Ā", "€"},
		},
		IAMRolePolicyName.What: iam.upTo(128),
		ECSTaskFamily.What:     ecs.upTo(255),
		ECSContainerName.What:  ecs.upTo(255),
		ECSServiceName.What:    ecs.upTo(255),
		ECSClusterName.What:    ecs.upTo(255),
		CloudMapServiceName.What: {
			inside:  []string{at(63, "a"), "bus", "bus-1", "B2"},
			outside: []string{at(64, "a"), "", "-bus", "bus-", "bus_1", "bus.1"},
		},
		CloudMapNamespaceName.What: {
			inside:  []string{at(63, "a") + "." + at(63, "b") + "." + at(63, "c") + "." + at(61, "d"), "flock.flock.internal", "internal"},
			outside: []string{at(63, "a") + "." + at(63, "b") + "." + at(63, "c") + "." + at(62, "d"), at(64, "a") + ".internal", "", "a..b", "-a.internal", "a_b.internal", "a b"},
		},
		LogGroupName.What: {
			inside:  []string{at(512, "a"), "/ai-flock/aws.prod_1/flock/agents/agent-1#x"},
			outside: []string{at(513, "a"), "", "/a b", "/a:b", "/a*b"},
		},
		DashboardName.What: {
			inside:  []string{at(255, "a"), "ai-flock-aws-prod_1-flock", "A-Z_0-9"},
			outside: []string{at(256, "a"), "", "a.b", "a b", "a/b", "a:b"},
		},
		TagKey.What: {
			inside:  []string{at(128, "k"), "ai-flock.flock", "a b_c.d:e/f=g+h-i@j", "Ünïcødé"},
			outside: []string{at(129, "k"), "", "aws:role", "AWS:role", "a*b", "a'b", "a,b"},
		},
		TagValue.What: {
			inside:  []string{at(256, "v"), "", "agent-1"},
			outside: []string{at(257, "v"), "aws:x", "a;b", "a'b"},
		},
		ECRRepositoryName.What: {
			inside:  []string{at(256, "a"), "ab", "flock-images-xxxxxxx", "team/flock.images_1"},
			outside: []string{at(257, "a"), "a", "Flock", "a--b", "-ab", "ab/", "a b"},
		},
		EFSAccessPointPath.What: {
			inside:  []string{"/" + at(99, "a"), "/", "/agents/agent-1", "/a/b/c/d"},
			outside: []string{"/" + at(100, "a"), "", "/a/b/c/d/e", "agents", "/.hidden", "/a/", "/a$b", "/a;b", "/a&b"},
		},
		SecretName.What: {
			inside:  []string{at(512, "s"), "flock-agent-1-nkey-xxxxxxx", "a/b_c+d=e.f@g-h"},
			outside: []string{at(513, "s"), "", "a b", "a:b", "a*b", "é"},
		},
	}
}

func TestEveryRuleAtItsEdges(t *testing.T) {
	table := edges()
	for _, r := range Rules() {
		e, ok := table[r.What]
		if !ok {
			t.Errorf("rule %q has no edges in this test", r.What)
			continue
		}
		if len(e.inside) == 0 || len(e.outside) == 0 {
			t.Errorf("rule %q: values inside and outside are both needed", r.What)
		}
		if r.Ref == "" || r.Type == "" || r.Field == "" || r.Input == "" {
			t.Errorf("rule %q lacks its type, field, input or reference", r.What)
		}
		for _, v := range e.inside {
			if err := r.Check(v); err != nil {
				t.Errorf("%s refuses %.40q: %v", r.What, v, err)
			}
		}
		for _, v := range e.outside {
			err := r.Check(v)
			var viol *Violation
			if !errors.As(err, &viol) {
				t.Errorf("%s accepts %.40q", r.What, v)
				continue
			}
			if viol.Value != v || viol.Problem == "" || !strings.Contains(err.Error(), r.Ref) || !strings.Contains(err.Error(), r.What) {
				t.Errorf("%s: the error for %.40q does not say the value, the problem, the rule and the reference: %v", r.What, v, err)
			}
		}
	}
}

func TestEveryRangeAtItsEdges(t *testing.T) {
	for _, r := range Ranges() {
		if r.Ref == "" || r.Field == "" {
			t.Errorf("range %q lacks its field or reference", r.What)
		}
		for _, v := range []int{r.Min, r.Max, (r.Min + r.Max) / 2} {
			if err := r.Check(v); err != nil {
				t.Errorf("%s refuses %d: %v", r.What, v, err)
			}
		}
		for _, v := range []int{r.Min - 1, r.Max + 1} {
			if err := r.Check(v); err == nil {
				t.Errorf("%s accepts %d", r.What, v)
			} else if !strings.Contains(err.Error(), r.Ref) {
				t.Errorf("%s: %v does not name %s", r.What, err, r.Ref)
			}
		}
	}
	// The limits themselves, as ECS's HealthCheck reference gives them.
	for _, c := range []struct {
		r        Range
		min, max int
	}{{HealthCheckInterval, 5, 300}, {HealthCheckTimeout, 2, 60}, {HealthCheckRetries, 1, 10}, {HealthCheckStartPeriod, 0, 300}} {
		if c.r.Min != c.min || c.r.Max != c.max {
			t.Errorf("%s is %d-%d, ECS says %d-%d", c.r.What, c.r.Min, c.r.Max, c.min, c.max)
		}
	}
}

// The error reads as a sentence: the value, its problem, the rule and where it comes from.
func TestViolationMessage(t *testing.T) {
	// A 20-character flock name and a 31-character agent ID: 70 > 64.
	name := AutoName(at(20, "f") + "-" + at(31, "a") + "-exec-role")
	err := IAMRoleName.Check(name)
	want := `IAM role name "` + name + `" is 70 characters long; IAM role name: at most 64 characters of [\w+=,.@-] (IAM API Reference, CreateRole, RoleName)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if err := IAMRoleName.Check(AutoName(at(14, "f") + "-" + at(31, "a") + "-exec-role")); err != nil {
		t.Errorf("a 64-character role name refused: %v", err)
	}
	err = SecurityGroupDescription.Check("NFS from the flock's tasks")
	if err == nil || !strings.Contains(err.Error(), `holds the character '\''`) {
		t.Errorf("apostrophe: %v", err)
	}
	if got := len(AutoName("x")); got != 1+AutoNameRandom {
		t.Errorf("AutoName adds %d characters, want %d", got-1, AutoNameRandom)
	}
}

// A namePrefix leaves room for the provider's 26 characters: a role's is 38.
func TestPrefixOf(t *testing.T) {
	p := PrefixOf(IAMRoleName)
	if p.Max != IAMRoleNamePrefix.Max || p.Max != 38 {
		t.Errorf("role name prefix at most %d, table says %d", p.Max, IAMRoleNamePrefix.Max)
	}
	if p.Check(at(38, "a")) != nil || p.Check(at(39, "a")) == nil || p.Check("a b") == nil {
		t.Error("the prefix rule does not hold the edges")
	}
}
