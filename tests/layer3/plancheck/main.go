// Command plancheck reads `pulumi preview --json` from stdin and checks that
// adding one agent only adds that agent's resources: every create is the new
// agent's, the only update is the bus config step (the bus learns the new
// user on SIGHUP), and nothing is replaced or deleted. It prints the steps
// by operation and exits 1 with the offending steps otherwise.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type preview struct {
	Steps []struct {
		Op          string   `json:"op"`
		URN         string   `json:"urn"`
		DiffReasons []string `json:"diffReasons"`
	} `json:"steps"`
	ChangeSummary map[string]int `json:"changeSummary"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: plancheck FLOCK-NAME NEW-AGENT-ID < preview.json")
		os.Exit(2)
	}
	if err := check(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "plancheck:", err)
		os.Exit(1)
	}
}

func check(flock, agent string) error {
	var p preview
	if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
		return fmt.Errorf("preview JSON: %w", err)
	}
	ofAgent := func(name string) bool {
		return name == flock+"-"+agent || strings.HasPrefix(name, flock+"-"+agent+"-")
	}
	byOp := map[string][]string{}
	var bad []string
	for _, s := range p.Steps {
		name := s.URN[strings.LastIndex(s.URN, "::")+2:]
		if s.Op == "same" || s.Op == "read" {
			continue
		}
		byOp[s.Op] = append(byOp[s.Op], name)
		switch s.Op {
		case "create":
			if !ofAgent(name) {
				bad = append(bad, fmt.Sprintf("creates %s, which is not %s's", name, agent))
			}
		case "update":
			if name != flock+"-bus-config" {
				bad = append(bad, fmt.Sprintf("updates %s (%s)", name, strings.Join(s.DiffReasons, ", ")))
			}
		default:
			bad = append(bad, fmt.Sprintf("%s %s (%s)", s.Op, name, strings.Join(s.DiffReasons, ", ")))
		}
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		names := byOp[op]
		sort.Strings(names)
		fmt.Printf("  %-8s %s\n", op, strings.Join(names, " "))
	}
	fmt.Printf("  %-8s %d resources unchanged\n", "same", p.ChangeSummary["same"])
	if len(byOp["create"]) == 0 {
		bad = append(bad, "creates nothing: the new agent is not in the plan")
	}
	if len(bad) > 0 {
		return fmt.Errorf("adding %s changes more than %s:\n  %s", agent, agent, strings.Join(bad, "\n  "))
	}
	return nil
}
