package stacks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The aws stack's bus as a three-node cluster: the default, its task
// storage, and what moving a flock from one node to three changes.

// Without flock:bus.replicas the aws stack runs three bus nodes, and its
// outputs give every node's URL.
func TestAWSDefaultBusIsThreeNodes(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:agentCount": "2"})
	for _, k := range (awsBus{nodes: 3}).keys() {
		awsGet(t, s, awsrules.TypeService, "flock-"+k)
	}
	if _, ok := s.Get(awsrules.TypeService, "flock-bus"); ok {
		t.Error("a single bus service besides the nodes")
	}
	if got := s.Outputs["busUrl"].Value; got != (awsBus{nodes: 3}).url() {
		t.Errorf("busUrl %v, want every node's URL", got)
	}
	if got := s.Outputs["monitorUrl"].Value; got != "http://bus-1.flock.flock.internal:8222" {
		t.Errorf("monitorUrl %v, want node 1's", got)
	}
	one := awsStack(t, (awsBus{nodes: 1}).config(capture.Config{"flock:agentCount": "2"}))
	if got := one.Outputs["busUrl"].Value; got != "nats://bus.flock.flock.internal:4222" {
		t.Errorf("one node: busUrl %v", got)
	}
}

// A node's task storage holds its store: a store beyond the free 20 GiB
// asks Fargate for more; one beyond Fargate's 200 GiB is a config error
// that names the key.
func TestAWSClusterTaskStorage(t *testing.T) {
	s := awsStack(t, capture.Config{"flock:bus": `{"replicas": 3, "jetStreamMaxMiB": 65536}`})
	for _, k := range (awsBus{nodes: 3}).keys() {
		td := awsGet(t, s, awsrules.TypeTaskDefinition, "flock-"+k+"-task")
		if got := obj(td, "ephemeralStorage")["sizeInGib"]; got != float64(68) {
			t.Errorf("%s: task storage %v GiB, want 68 (64 GiB of store and 4 of headroom)", k, got)
		}
	}
	// A single bus keeps its store on EFS: no task storage asked.
	one := awsStack(t, capture.Config{"flock:bus": `{"replicas": 1, "jetStreamMaxMiB": 65536}`})
	if es := obj(awsGet(t, one, awsrules.TypeTaskDefinition, "flock-bus-task"), "ephemeralStorage"); es != nil {
		t.Errorf("a single bus asks for task storage %v", es)
	}
	_, err := capture.RunAWS(capture.Config{"flock:bus": `{"replicas": 3, "jetStreamMaxMiB": 250000}`})
	if err == nil || !strings.Contains(err.Error(), "flock:bus.jetStreamMaxMiB: a clustered bus node keeps its store on Fargate task storage") {
		t.Fatalf("a 250000 MiB store on a cluster: %v, want the config error naming flock:bus.jetStreamMaxMiB", err)
	}
}

// Moving a flock from one bus node to three replaces the bus (new services,
// names and empty stores; the single bus and its EFS store go) and re-points
// every agent and the operator at the nodes (their task definitions), and
// touches nothing else of theirs: not their directories, credentials, roles
// or logs.
func TestAWSOneToThreeNodes(t *testing.T) {
	one := awsStack(t, (awsBus{nodes: 1}).config(capture.Config{"flock:agentCount": "3"}))
	three := awsStack(t, (awsBus{nodes: 3}).config(capture.Config{"flock:agentCount": "3"}))
	changed, removed, added := changedBetween(one, three)
	isBus := func(name string) bool {
		return name == "flock-bus" || strings.HasPrefix(name, "flock-bus-") ||
			strings.HasPrefix(name, "flock-sg-bus-") || name == "flock-sg-efs-from-bus"
	}
	for _, r := range removed {
		if !isBus(r) {
			t.Errorf("going to three nodes removes %s", r)
		}
	}
	for _, a := range added {
		if !isBus(a) {
			t.Errorf("going to three nodes adds %s", a)
		}
	}
	for _, want := range []string{"flock-bus", "flock-bus-task", "flock-bus-ap", "flock-bus-discovery"} {
		if !slices.Contains(removed, want) {
			t.Errorf("the single bus's %s stays", want)
		}
	}
	// The services' task too: FLOCK_SERVICES_NATS_URL lists the nodes.
	allowed := []string{"flock-operator-task", "flock-services-task", "flock-agent-1-task", "flock-agent-2-task", "flock-agent-3-task"}
	for _, c := range changed {
		if !slices.Contains(allowed, c) {
			t.Errorf("going to three nodes changes %s", c)
		}
	}
	for _, want := range allowed {
		if !slices.Contains(changed, want) {
			t.Errorf("%s is not re-pointed at the nodes", want)
		}
	}
}
