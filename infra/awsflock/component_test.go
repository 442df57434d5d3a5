package awsflock_test

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/ai-flock/ai-flock/infra/awsflock"
	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/infra/flock"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// args are the component's arguments for n agents, as the stack would give
// them (validated config, placeholder credentials and bus files), with the
// aws default of three bus nodes.
func args(t *testing.T, n int) awsflock.Args { return argsWith(t, n, nil) }

// argsWith sets flock:bus.replicas (nil: the default).
func argsWith(t *testing.T, n int, replicas *int) awsflock.Args {
	t.Helper()
	m, err := flock.Config{Target: string(flock.TargetAWS), Name: "f", AgentCount: &n, Bus: flock.BusConfig{Replicas: replicas}}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	a, err := awsflock.Config{ImageTag: "test"}.Validate("aws", m, true)
	if err != nil {
		t.Fatal(err)
	}
	a.Seeds = map[string]string{}
	for _, ag := range m.Agents {
		a.Seeds[ag.ID] = "SU-" + ag.ID
	}
	a.OperatorSeed, a.ServicesSeed, a.BusTopology = "SU-operator", "SU-services", []byte("{}")
	for range m.Bus.BusNodes() {
		a.BusConfigs = append(a.BusConfigs, []byte("{}"))
	}
	return a
}

func declare(t *testing.T, a awsflock.Args) (*capture.Stack, error) {
	t.Helper()
	return capture.RunProgram("aws", capture.Config{"aws:region": capture.MockRegion}, func(ctx *pulumi.Context) error {
		f, err := awsflock.New(ctx, "f", a)
		if err != nil {
			return err
		}
		ctx.Export("busUrl", f.BusURL)
		return nil
	})
}

// The component on its own: every resource its child, one service per agent
// plus one per bus node and one for the flock's services, each agent's seed
// a secret of its own, and its outputs.
func TestComponentDeclaresTheFlock(t *testing.T) {
	one := 1
	for _, c := range []struct {
		replicas *int
		services int
		url      string
	}{
		{&one, 5, "nats://bus.f.flock.internal:4222"},
		{nil, 7, "nats://bus-1.f.flock.internal:4222,nats://bus-2.f.flock.internal:4222,nats://bus-3.f.flock.internal:4222"},
	} {
		s, err := declare(t, argsWith(t, 3, c.replicas))
		if err != nil {
			t.Fatal(err)
		}
		if comps := s.ByType(capture.TypeAWSFlock); len(comps) != 1 {
			t.Fatalf("want one component, got %d", len(comps))
		}
		for _, r := range s.Resources {
			if r.Type != capture.TypeAWSFlock && r.Type != capture.TypeStack && !strings.HasSuffix(r.Parent, "flock:aws:Flock::f") {
				t.Errorf("%s %s is not the component's child (parent %q)", r.Type, r.Name, r.Parent)
			}
		}
		if n := len(s.ByType(awsrules.TypeService)); n != c.services {
			t.Errorf("%d services, want %d: 3 agents, the bus nodes and the flock's services", n, c.services)
		}
		for _, id := range []string{"agent-1", "agent-2", "agent-3", "services"} {
			if _, ok := s.Get(awsrules.TypeSecret, "f-"+id+"-nkey"); !ok {
				t.Errorf("no secret f-%s-nkey", id)
			}
		}
		// EFS has no quota: the file system's size has an alarm.
		alarm, ok := s.Get(awsrules.TypeMetricAlarm, "f-efs-size")
		if !ok {
			t.Fatalf("no alarm on the file system's size")
		}
		al := alarm.Inputs.Mappable()
		dims, _ := al["dimensions"].(map[string]any)
		if al["namespace"] != "AWS/EFS" || al["metricName"] != "StorageBytes" || dims["StorageClass"] != "Total" || dims["FileSystemId"] == nil ||
			al["threshold"] != float64(4<<30) || al["comparisonOperator"] != "GreaterThanThreshold" {
			t.Errorf("size alarm: %v", al)
		}
		if got, _ := s.Outputs["busUrl"].Value.(string); got != c.url {
			t.Errorf("busUrl %q, want %q", got, c.url)
		}
	}
}

// checkRefused checks that a is refused, naming want (what the test calls
// what it misses), before anything is declared.
func checkRefused(t *testing.T, a awsflock.Args, want, what string) {
	t.Helper()
	s, err := declare(t, a)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want the %s named, got %v", what, err)
	}
	if s != nil && len(s.Resources) > 1 {
		t.Errorf("declared %d resources before refusing", len(s.Resources))
	}
}

// A bus config per node: too few or too many is refused before anything is declared.
func TestComponentRefusesMissingBusConfigs(t *testing.T) {
	a := args(t, 2)
	a.BusConfigs = a.BusConfigs[:1]
	checkRefused(t, a, "1 bus configs for 3 bus nodes", "missing bus configs")
}

// Missing arguments are refused before anything is declared.
func TestComponentRefusesMissingCredentials(t *testing.T) {
	a := args(t, 2)
	delete(a.Seeds, "agent-2")
	checkRefused(t, a, "agent agent-2: no credentials", "missing credentials")
	a = args(t, 2)
	a.ServicesSeed = ""
	checkRefused(t, a, "no credentials for the flock's services", "missing services credentials")
}

// An agent's own image without its tags (Config.Validate derives them) is
// refused before anything is declared.
func TestComponentRefusesUntaggedOwnImage(t *testing.T) {
	a := args(t, 2)
	a.Model.Agents[1].Image = flock.Image{Base: "python:3.12-slim", ConfigKey: "flock:agents[1].image"}
	checkRefused(t, a, "flock:agents[1].image: no tags for its image", "untagged image")
}
