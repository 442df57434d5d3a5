package stacks_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/infra/credentials"
	"github.com/ai-flock/ai-flock/protocol"
	"github.com/ai-flock/ai-flock/tests/capture"
)

// The dev stack runs the flock's services (the board) as a container of
// their own: the bus image with /flock-services, hardened like every
// container, on an internal network of their own that the bus nodes join,
// with their bus key in a secret step and nowhere else.
func TestDevServices(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d bus nodes", replicas), func(t *testing.T) {
			s := dev(t, capture.Config{"flock:agentCount": "3", "flock:bus": fmt.Sprintf(`{"replicas": %d}`, replicas)})
			c, ok := s.Get(capture.TypeContainer, "flock-services")
			if !ok {
				t.Fatal("no services container")
			}
			p := c.Plain()
			bus, _ := s.Get(capture.TypeContainer, busContainerName(replicas))
			// The pool's third slot from the end: 10.210.255.232/29, the
			// services at its last address, UID 20000+8189.
			if p["user"] != "28189:28189" || p["readOnly"] != true || p["privileged"] == true || label(c, "ai-flock.role") != "services" {
				t.Errorf("services: user %v readOnly %v role %q", p["user"], p["readOnly"], label(c, "ai-flock.role"))
			}
			if p["image"] != bus.Plain()["image"] || fmt.Sprint(p["entrypoints"]) != "[/flock-services]" {
				t.Errorf("services: image %v (the bus's: %v), entrypoint %v", p["image"], bus.Plain()["image"], p["entrypoints"])
			}
			if fmt.Sprint(p["capabilities"]) != "map[drops:[ALL]]" || p["ports"] != nil && len(p["ports"].([]any)) > 0 {
				t.Errorf("services: capabilities %v, ports %v", p["capabilities"], p["ports"])
			}
			joined := networksJoined(c)
			if strings.Join(joined, " ") != "flock-services-net@10.210.255.238" {
				t.Errorf("services join %v", joined)
			}
			net, _ := s.Get(capture.TypeNetwork, "flock-services-net")
			if net.Plain()["internal"] != true || label(net, "ai-flock.role") != "services" {
				t.Errorf("services network: %v", net.Plain())
			}
			var nodes []string
			for n := 1; n <= replicas; n++ {
				nodes = append(nodes, fmt.Sprintf("nats://10.210.255.%d:4222", 232+n+1))
			}
			env := envOf(c)
			if env[protocol.EnvServicesNATSURL] != strings.Join(nodes, ",") || env[protocol.EnvServicesNkeyFile] != protocol.ServicesCredsFile {
				t.Errorf("services environment %v", env)
			}
			links := 0
			for _, cmd := range s.ByType(capture.TypeCommand) {
				if strings.HasPrefix(cmd.Name, "flock-services-bus") && strings.HasSuffix(cmd.Name, "-link") && strings.Contains(cmd.String("create"), "flock-services-net") {
					links++
				}
			}
			if links != replicas {
				t.Errorf("%d bus links to the services' network, want %d", links, replicas)
			}
			if _, ok := s.Get(capture.TypeCommand, "flock-services-pids-limit"); !ok {
				t.Error("no pids-limit step for the services")
			}

			// The key: in the secret step only.
			key, err := credentials.Derive([]byte(capture.TestSecret), protocol.ServicesUser)
			if err != nil {
				t.Fatal(err)
			}
			step, _ := s.Get(capture.TypeCommand, "flock-services-key")
			enc := base64.StdEncoding.EncodeToString([]byte(key.Seed))
			if in := step.Inputs["stdin"]; !in.IsSecret() || !strings.Contains(in.SecretValue().Element.StringValue(), enc) {
				t.Error("the services key step must carry their seed as a secret")
			}
			for _, r := range s.Resources {
				var strs []string
				for _, v := range r.Inputs {
					plainStrings(v, &strs)
				}
				if slices.ContainsFunc(strs, func(v string) bool { return strings.Contains(v, key.Seed) || strings.Contains(v, enc) }) {
					t.Errorf("%s holds the services' seed in a plain input", r.Name)
				}
			}
		})
	}
}

func busContainerName(replicas int) string {
	if replicas == 1 {
		return "flock-bus"
	}
	return "flock-bus-1"
}

// Adding an agent changes none of the services' resources: they learn of
// it from the bus.
func TestAddingAnAgentLeavesTheServices(t *testing.T) {
	three, four := dev(t, count(3)), dev(t, count(4))
	changed, removed, _ := changedBetween(three, four)
	for _, name := range append(changed, removed...) {
		if strings.HasPrefix(name, "flock-services") {
			t.Errorf("adding an agent changed %s", name)
		}
	}
}
