package stacks_test

import (
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// Configuration errors surface through the real program, naming key and rule,
// and nothing at all is declared when the configuration is invalid.
func TestStackConfigErrors(t *testing.T) {
	base := capture.Config{"flock:target": "docker", "flock:agentCount": "3"}
	cases := []struct {
		name    string
		cfg     capture.Config
		secrets []string
		want    string
	}{
		{"unknown field", capture.Config{"flock:limits": `{"memoryMb": 512}`}, nil, `flock:limits: must be an object {cpus, memoryMiB, pids, tmpfsMiB, taskTimeout, concurrency, diskMiB}: unknown field "memoryMb"`},
		{"wrong type", capture.Config{"flock:agentCount": `"three"`}, nil, "flock:agentCount: must be a whole number"},
		{"wrong field type", capture.Config{"flock:limits": `{"pids": "many"}`}, nil, `field "pids" cannot be a JSON string`},
		{"validation", capture.Config{"flock:agentCount": "0"}, nil, "flock:agentCount: must be between 1 and 1000 (got 0)"},
		{"tcp docker host", capture.Config{"docker:host": "tcp://10.0.0.5:2375"}, nil, "docker:host: must be empty, unix://… or ssh://"},
		{"bad ssh host", capture.Config{"docker:host": "ssh://"}, nil, "docker:host: must be ssh://[user@]host[:port]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, secrets := capture.WithSecret(base)
			for k, v := range tc.cfg {
				cfg[k] = v
			}
			_, err := capture.Run("dev", cfg, secrets...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestBusSecretRules(t *testing.T) {
	base := capture.Config{"flock:target": "docker", "flock:agentCount": "1"}
	if _, err := capture.Run("dev", base); err == nil || !strings.Contains(err.Error(), "flock:busSecret: is required") {
		t.Errorf("missing secret: %v", err)
	}
	plain := capture.Config{"flock:busSecret": capture.TestSecret}
	for k, v := range base {
		plain[k] = v
	}
	if _, err := capture.Run("dev", plain); err == nil || !strings.Contains(err.Error(), "flock:busSecret: must be stored as a secret") {
		t.Errorf("plain-text secret: %v", err)
	}
	short := capture.Config{"flock:busSecret": "short"}
	for k, v := range base {
		short[k] = v
	}
	if _, err := capture.Run("dev", short, "flock:busSecret"); err == nil || !strings.Contains(err.Error(), "flock:busSecret: must be at least 32 characters") {
		t.Errorf("short secret: %v", err)
	}
}

// Invalid config declares nothing: no half-deployed flock.
func TestInvalidConfigDeclaresNothing(t *testing.T) {
	cfg, secrets := capture.WithSecret(capture.Config{"flock:target": "docker", "flock:agentCount": "3", "flock:limits": `{"pids": 1}`})
	s, err := capture.Run("dev", cfg, secrets...)
	if err == nil {
		t.Fatalf("accepted invalid config; declared %d resources", len(s.Resources))
	}
}

// On the aws stack, flock:aws problems come in the same list as the model's.
func TestAWSConfigErrorsReportedWithTheRest(t *testing.T) {
	checkReportedTogether(t, "aws", capture.Config{
		"flock:target": "aws", "aws:region": "eu-west-1", "flock:agentCount": "0",
		"flock:aws": `{"egress": "teleport"}`,
	}, "flock:agentCount: must be between 1 and 1000", "flock:aws.egress")
	// flock:aws that is not even the right shape is the stack's to report.
	_, err := capture.RunAWS(capture.Config{"flock:aws": `{"vpc":"vpc-1"}`})
	if err == nil || !strings.Contains(err.Error(), `flock:aws: must be an object {vpcId,`) || !strings.Contains(err.Error(), `unknown field "vpc"`) {
		t.Errorf("unknown field in flock:aws: %v", err)
	}
}

// On the dev stack, docker:host problems come in the same list as the model's.
func TestDockerHostErrorsReportedWithTheRest(t *testing.T) {
	checkReportedTogether(t, "dev", capture.Config{
		"flock:target": "docker", "flock:agentCount": "0", "docker:host": "tcp://10.0.0.5:2375",
	}, "flock:agentCount: must be between 1 and 1000", "docker:host: must be empty, unix://")
}

// checkReportedTogether checks that stack refuses c (with the test bus
// secret) with an error that names every one of wants.
func checkReportedTogether(t *testing.T, stack string, c capture.Config, wants ...string) {
	t.Helper()
	cfg, secrets := capture.WithSecret(c)
	_, err := capture.Run(stack, cfg, secrets...)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in:\n%v", want, err)
		}
	}
}
