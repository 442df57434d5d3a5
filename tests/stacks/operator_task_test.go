package stacks_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/agent/cli"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/bustest"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws operator task runs the operator CLI with the environment and the
// secrets its task definition declares. Run the CLI with exactly those (the
// secrets resolved to the values the stack stores in them) against a real
// bus holding the stack's keys: it must authenticate as the operator.
func TestAWSOperatorTaskEnvironmentReachesTheBus(t *testing.T) {
	s := awsStack(t, nil)
	c := awsContainer(t, awsGet(t, s, awsrules.TypeTaskDefinition, "flock-operator-task"))
	env := map[string]string{}
	for _, kv := range c.Environment {
		env[kv.Name] = kv.Value
	}
	for _, sec := range c.Secrets {
		found := false
		for _, r := range s.Resources {
			if r.Type == awsrules.TypeSecret && r.MockARN() == sec.ValueFrom {
				env[sec.Name] = awsGet(t, s, awsrules.TypeSecretVersion, r.Name).String("secretString")
				found = true
			}
		}
		if !found {
			t.Fatalf("operator secret %s: no secret %s in the stack", sec.Name, sec.ValueFrom)
		}
	}
	if len(c.Secrets) == 0 {
		t.Fatal("the operator task has no secrets: it could not authenticate")
	}
	bus := bustest.StartWithMaster(t, bustest.Agents(3), []byte(capture.TestSecret))
	if _, ok := env["FLOCK_NATS_URL"]; !ok {
		t.Fatal("the operator task does not name the bus (FLOCK_NATS_URL)")
	}
	env["FLOCK_NATS_URL"] = bus.URL // Cloud Map's name resolves only inside the VPC

	run := func(env map[string]string) (int, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), []string{"agents", "--json"}, func(k string) string { return env[k] },
			cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String() + errb.String()
	}
	if code, out := run(env); code != cli.ExitOK {
		t.Fatalf("operator CLI with the task's environment: exit %d: %s", code, out)
	}
	// Control: without the secrets the bus refuses the same command.
	bare := map[string]string{"FLOCK_NATS_URL": bus.URL}
	if code, out := run(bare); code == cli.ExitOK {
		t.Fatalf("operator CLI without credentials was let in: %s", out)
	}
}
