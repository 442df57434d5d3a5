package awsflock

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/protocol"
)

// validateOn validates model and flock:aws as the stack named stack does.
func validateOn(t *testing.T, stack, model, aws string) []error {
	t.Helper()
	var mc flock.Config
	if err := json.Unmarshal([]byte(model), &mc); err != nil {
		t.Fatal(err)
	}
	mc.Target = string(flock.TargetAWS)
	var c Config
	if err := json.Unmarshal([]byte(aws), &c); err != nil {
		t.Fatal(err)
	}
	m, err := mc.Validate()
	if err != nil {
		t.Fatalf("the model itself was refused: %v", err)
	}
	_, err = c.Validate(stack, m, true)
	return protocol.Problems(err)
}

func messages(errs []error) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

// The roles are auto-named <flock>-<agent>-exec-role / -task-role plus 8
// characters: a 20-character flock:name with a 31-character agent ID makes
// 70, and IAM takes 64. Both are valid on their own; together they are
// refused before anything is declared, every such agent at once, each by
// its key, with the name AWS would have seen and the rule.
func TestConfigRefusesRoleNamesIAMWouldRefuse(t *testing.T) {
	const (
		name = "a-20-character-flock"            // 20
		long = "a-31-character-agent-identifier" // 31
		also = "another-31-character-identifier" // 31
	)
	model := `{"name": "` + name + `", "agents": [{"id": "agent-1"}, {"id": "` + long + `", "slot": 2}, {"id": "` + also + `", "slot": 3}]}`
	errs := validateOn(t, "aws", model, `{"logRetentionDays": 42}`)
	want := []string{
		`flock:aws.logRetentionDays: must be one of CloudWatch's retention periods`,
		`flock:agents[1].id: "` + long + `" would make the IAM role name "` + name + `-` + long + `-exec-role-xxxxxxx" (auto-named: the provider adds "-" and 7 random characters), which is 70 characters long; IAM role name: at most 64 characters of [\w+=,.@-] (IAM API Reference, CreateRole, RoleName)`,
		`flock:agents[1].id: "` + long + `" would make the IAM role name "` + name + `-` + long + `-task-role-xxxxxxx"`,
		`flock:agents[2].id: "` + also + `" would make the IAM role name "` + name + `-` + also + `-exec-role-xxxxxxx"`,
		`flock:agents[2].id: "` + also + `" would make the IAM role name "` + name + `-` + also + `-task-role-xxxxxxx"`,
	}
	if len(errs) != len(want) {
		t.Fatalf("errors:\n%s\nwant %d", messages(errs), len(want))
	}
	for i, w := range want {
		var fe *flock.Error
		if e, ok := errs[i].(*flock.Error); ok {
			fe = e
		}
		if fe == nil || !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d:\n%v\nwant (a *flock.Error) starting\n%s", i, errs[i], w)
		}
	}
	// At the limit: 14 + 1 + 31 + 10 + 8 = 64.
	if errs := validateOn(t, "aws", `{"name": "fourteen-chars", "agents": [{"id": "`+long+`", "slot": 1}]}`, `{}`); len(errs) > 0 {
		t.Errorf("role names of exactly 64 characters refused:\n%s", messages(errs))
	}
}

// Generated IDs (agent-<N>) are blamed on flock:agentCount; names that
// only the flock's name or the stack's make, on flock:name, saying what
// AWS would have seen.
func TestConfigNameErrorKeys(t *testing.T) {
	stack := strings.Repeat("s", 250)
	errs := validateOn(t, stack, `{"name": "f", "agentCount": 1, "bus": {"replicas": 1}}`, `{}`)
	got := messages(errs)
	for _, w := range []string{
		`flock:name: "f" would make the ECS task definition family "` + stack + `-f-operator", which is 261 characters long; ECS task definition family: at most 255 characters of letters, digits, _ and - (ECS API Reference, RegisterTaskDefinition, family)`,
		`flock:name: "f" would make the ECS task definition family "` + stack + `-f-bus"`,
		`flock:name: "f" would make the ECS task definition family "` + stack + `-f-services"`,
		`flock:agentCount: "agent-1" would make the ECS task definition family "` + stack + `-f-agent-1"`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("want an error\n%s\ngot\n%s", w, got)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors, want 4 (one family per task; log group names are 512):\n%s", len(errs), got)
	}
}

// The default configuration and the largest flock:name with generated IDs
// break no rule, on a stack name of ordinary length.
func TestConfigNamesOfOrdinaryFlocks(t *testing.T) {
	for _, model := range []string{
		`{"agentCount": 3}`,
		`{"name": "a-20-character-flock", "agentCount": 100}`,
		`{"name": "f", "agentCount": 2, "bus": {"replicas": 1}, "gateway": {"upstreams": {"anthropic": {}}}}`,
	} {
		if errs := validateOn(t, "production-eu-west-1", model, `{"namespace": "flock.example.internal"}`); len(errs) > 0 {
			t.Errorf("%s refused:\n%s", model, messages(errs))
		}
	}
}
