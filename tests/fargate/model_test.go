package fargate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

func read(t *testing.T, cfg capture.Config) *Model {
	t.Helper()
	s, err := capture.RunAWS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Read(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func service(t *testing.T, m *Model, name string) *Service {
	t.Helper()
	for _, s := range m.Services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no service %s", name)
	return nil
}

func at(m *Model, s *Service) Endpoint { return Endpoint{Groups: s.Groups, Subnet: s.Subnets[0]} }

// What the replay reads of the aws stack, and the reachability it derives
// from its security groups and routes: agents reach every bus node and
// nothing else; the nodes reach each other; no task but (with egress nat)
// every one has a route out; every task reaches the AWS APIs and its file
// system.
func TestReadTheAWSStack(t *testing.T) {
	for _, egress := range []string{"endpoints", "nat"} {
		t.Run(egress, func(t *testing.T) {
			m := read(t, capture.Config{"flock:agentCount": "3", "flock:aws": `{"egress": "` + egress + `"}`})
			if len(m.Services) != 7 {
				t.Fatalf("%d services, want 3 agents, 3 bus nodes and the flock's services", len(m.Services))
			}
			bus1, a1, a2 := service(t, m, "flock-bus-1"), service(t, m, "flock-agent-1"), service(t, m, "flock-agent-2")
			if bus1.Registry != "bus-1.flock.flock.internal" || !bus1.WaitSteady || a1.Registry != "" {
				t.Errorf("bus-1 %+v, agent-1 %+v", bus1, a1)
			}
			if !strings.Contains(strings.Join(a1.After, " "), "flock-bus-3") || !strings.Contains(strings.Join(service(t, m, "flock-bus-2").After, " "), "flock-bus-1") {
				t.Errorf("agent-1 after %v, bus-2 after %v", a1.After, service(t, m, "flock-bus-2").After)
			}
			if !m.Reach(at(m, a1), at(m, bus1)) || !m.ReachPort(at(m, a1), at(m, bus1), 4222) || m.ReachPort(at(m, a1), at(m, bus1), 8222) {
				t.Error("agent-1 must reach bus-1 on 4222 only")
			}
			if m.Reach(at(m, a1), at(m, a2)) || m.Reach(at(m, bus1), at(m, a1)) {
				t.Error("an agent is reachable from another task")
			}
			// The flock's services reach every node on 4222, and nothing reaches them.
			svcs := service(t, m, "flock-services")
			for _, n := range []string{"flock-bus-1", "flock-bus-2", "flock-bus-3"} {
				if bus := service(t, m, n); !m.ReachPort(at(m, svcs), at(m, bus), 4222) || m.ReachPort(at(m, svcs), at(m, bus), 8222) || m.Reach(at(m, bus), at(m, svcs)) {
					t.Errorf("the services must reach %s on 4222 only, and not be reached by it", n)
				}
			}
			if m.Reach(at(m, a1), at(m, svcs)) || m.Reach(at(m, svcs), at(m, a1)) || svcs.Registry != "" || !strings.Contains(strings.Join(svcs.After, " "), "flock-bus-3") {
				t.Errorf("the services %+v: want no way to or from agent-1, no Cloud Map name, started after bus-3", svcs)
			}
			if !m.Reach(at(m, bus1), at(m, service(t, m, "flock-bus-2"))) {
				t.Error("the bus nodes do not reach each other (routes)")
			}
			for _, s := range m.Services {
				if got := m.RouteOut(at(m, s), -1); got != (egress == "nat") {
					t.Errorf("%s: route out %v with egress %s", s.Name, got, egress)
				}
				if !m.ReachesAWS(at(m, s)) {
					t.Errorf("%s does not reach the AWS APIs", s.Name)
				}
			}
			td := m.TaskDefs[a1.TaskDef]
			fs := td.Volumes["agent"].EFS.FileSystemID
			if !m.ReachesEFS(at(m, a1), fs) || td.Arch != "X86_64" || td.CPU != 512 || td.MemoryMiB != 1024 {
				t.Errorf("agent-1's task: %+v", td)
			}
		})
	}
}

// A rule that lets an agent reach another, a security group that no
// longer admits the agents to the endpoints, or no NFS to EFS: the
// reachability the replay derives follows.
func TestReachFollowsTheRules(t *testing.T) {
	m := read(t, capture.Config{"flock:agentCount": "2"})
	a1, a2 := service(t, m, "flock-agent-1"), service(t, m, "flock-agent-2")
	agents := m.Groups[a1.Groups[0]]
	agents.Egress = append(agents.Egress, Rule{Protocol: "tcp", FromPort: 7000, ToPort: 7999, Peer: agents.ID})
	if m.Reach(at(m, a1), at(m, a2)) {
		t.Fatal("egress alone opened a way between agents")
	}
	agents.Ingress = append(agents.Ingress, Rule{Protocol: "tcp", FromPort: 7777, ToPort: 7777, Peer: agents.ID})
	if !m.Reach(at(m, a1), at(m, a2)) || m.ReachPort(at(m, a1), at(m, a2), 7000) {
		t.Fatal("egress 7000-7999 and ingress 7777 between agents: want reach on 7777 only")
	}
	var kept []Rule
	for _, r := range agents.Egress {
		if r.FromPort != 443 && r.FromPort != 2049 {
			kept = append(kept, r)
		}
	}
	agents.Egress = kept
	fs := m.TaskDefs[a1.TaskDef].Volumes["agent"].EFS.FileSystemID
	if m.ReachesAWS(at(m, a1)) || m.ReachesEFS(at(m, a1), fs) {
		t.Fatal("without 443 and 2049 out, an agent still reaches the AWS APIs or EFS")
	}
}

// An input the replay does not map is refused by name, as is a container
// definition field: the replay never runs less than the stack declares.
func TestReadRefusesWhatItDoesNotMap(t *testing.T) {
	s, err := capture.RunAWS(capture.Config{"flock:agentCount": "1"})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range s.Resources {
		switch {
		case r.Name == "flock-agent-1":
			s.Resources[i].Inputs["capacityProviderStrategies"] = resource.NewArrayProperty(nil)
		case r.Name == "flock-agent-1-task":
			defs := r.Inputs["containerDefinitions"].StringValue()
			s.Resources[i].Inputs["containerDefinitions"] = resource.NewStringProperty(strings.Replace(defs, `"name":"agent"`, `"name":"agent","privileged":true`, 1))
		}
	}
	_, err = Read(s)
	for _, want := range []string{`flock-agent-1: input "capacityProviderStrategies" is not mapped`, `flock-agent-1-task: containerDefinitions: json: unknown field "privileged"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}

func TestSubnetPool(t *testing.T) {
	p := newSubnetPool(mustPrefix("10.232.0.0/26"))
	var got []string
	for i := 0; i < 4; i++ {
		s, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.String())
	}
	if fmt.Sprint(got) != "[10.232.0.0/28 10.232.0.16/28 10.232.0.32/28 10.232.0.48/28]" {
		t.Fatalf("%v", got)
	}
	if _, err := p.get(); err == nil {
		t.Fatal("a /26 gave a fifth /28")
	}
	s, _ := netipParse("10.232.0.16/28")
	p.put(s)
	if again, err := p.get(); err != nil || again != s {
		t.Fatalf("a freed subnet is not given again: %v %v", again, err)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func netipParse(s string) (netip.Prefix, error) { return netip.ParsePrefix(s) }
