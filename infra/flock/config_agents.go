package flock

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

func (c Config) agents(es *errs, defaults Limits, uidBase int, net Network, gw ModelGateway) []Agent {
	type entry struct {
		key     string
		id      string
		slot    *int
		limits  LimitsConfig
		program []string
		gateway *AgentModelGatewayConfig
		image   *ImageConfig
		labels  []string
	}
	// The pool's last slots are the flock's own networks (the gateway's
	// two and the services'), with a gateway or without.
	capacity := net.Capacity() - reservedSlots
	var entries []entry
	switch {
	case c.AgentCount != nil && len(c.Agents) > 0:
		es.add("flock:agentCount", "set either flock:agentCount or flock:agents, not both")
		return nil
	case len(c.Agents) > 0:
		if len(c.Agents) > MaxAgents {
			es.add("flock:agents", "must list at most %d agents (got %d)", MaxAgents, len(c.Agents))
			return nil
		}
		for i, a := range c.Agents {
			entries = append(entries, entry{key: fmt.Sprintf("flock:agents[%d]", i), id: a.ID, slot: a.Slot, limits: a.Limits, program: a.Program, gateway: a.Gateway, image: a.Image, labels: a.Labels})
		}
	case c.AgentCount != nil:
		n := *c.AgentCount
		if n < 1 || n > MaxAgents {
			es.add("flock:agentCount", "must be between 1 and %d (got %d)", MaxAgents, n)
			return nil
		}
		if n >= capacity {
			es.add("flock:agentCount", "must be between 1 and %d (the per-agent subnets flock:network.pool %s holds at /%d%s) (got %d)", capacity-1, net.Pool, net.PrefixLength, reservedNote, n)
			return nil
		}
		for i := 1; i <= n; i++ {
			entries = append(entries, entry{key: "flock:agentCount", id: "agent-" + strconv.Itoa(i)})
		}
	default:
		es.add("flock:agentCount", "is required (or list the agents in flock:agents)")
		return nil
	}

	stackProgram := programJSON(es, "flock:program", c.Program)
	stackImage := c.Image.validate(es, "flock:image")
	seenID := map[string]string{}
	seenSlot := map[int]string{}
	var agents []Agent
	for _, e := range entries {
		ok := true
		switch {
		case !protocol.ValidAgentID(e.id):
			es.add(e.key+".id", "%v", &protocol.AgentIDError{ID: e.id})
			ok = false
		case reservedIDs[e.id]:
			es.add(e.key+".id", "%q is reserved for the bus (tasks.%s and friends); choose another ID", e.id, e.id)
			ok = false
		case busNodeID.MatchString(e.id):
			es.add(e.key+".id", "%q is reserved: bus-<n> names the nodes of a clustered bus; choose another ID", e.id)
			ok = false
		case seenID[e.id] != "":
			es.add(e.key+".id", "duplicates %s: agent IDs must be unique (got %q)", seenID[e.id], e.id)
			ok = false
		}
		seenID[e.id] = e.key
		slot := 0
		if e.slot != nil {
			slot = *e.slot
		} else if mm := countID.FindStringSubmatch(e.id); mm != nil {
			slot, _ = strconv.Atoi(mm[1])
		} else if ok {
			es.add(e.key+".slot", "is required for agent %q: only agent-<N> IDs get slot N by default, and the slot fixes the agent's UID and subnet so they never change", e.id)
			ok = false
		}
		if ok {
			switch {
			case slot < 1 || slot >= capacity:
				es.add(e.key+".slot", "must be between 1 and %d (the per-agent subnets in flock:network.pool%s) (got %d)", capacity-1, reservedNote, slot)
				ok = false
			case seenSlot[slot] != "":
				es.add(e.key+".slot", "duplicates the slot of %s: each agent needs its own slot, UID and subnet (got %d)", seenSlot[slot], slot)
				ok = false
			}
			seenSlot[slot] = e.id
		}
		limits := e.limits.validate(es, e.key+".limits", defaults)
		if ov, has := c.Overrides[e.id]; has {
			limits = ov.validate(es, "flock:overrides."+e.id, limits)
		}
		labels := boardLabels(es, e.key+".labels", e.labels)
		if !ok {
			continue
		}
		subnet, err := net.subnetFor(slot)
		if err != nil {
			es.add(e.key+".slot", "%v", err)
			continue
		}
		program := stackProgram
		if e.program != nil { // its own, or [] for none
			program = programJSON(es, e.key+".program", e.program)
		}
		access := c.Gateway.access(es, e.key, e.gateway, gw)
		img := stackImage
		if e.image != nil {
			img = e.image.validate(es, e.key+".image")
		}
		idKey := e.key
		if e.key != "flock:agentCount" {
			idKey += ".id"
		}
		agents = append(agents, Agent{ID: e.id, Slot: slot, UID: uidBase + slot, GID: uidBase + slot, Subnet: subnet, Limits: limits, Program: program, Gateway: access, Image: img, Labels: labels, IDKey: idKey})
	}
	for id := range c.Overrides {
		if seenID[id] == "" {
			es.add("flock:overrides."+id, "names no agent of this flock (agents: %s)", strings.Join(slices.Sorted(maps.Keys(seenID)), ", "))
		}
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i].Slot < agents[j].Slot })
	return agents
}

const reservedNote = ", less the last three, which are the flock's own: the gateway's and the services'"

// boardLabels validates an agent's labels (flock:agents[i].labels), what the
// board lets it claim, and returns them in the order given (nil for none).
// Every bad label is reported, each under its own key.
func boardLabels(es *errs, key string, labels []string) []string {
	if len(labels) == 0 {
		return nil
	}
	ok := true
	if len(labels) > protocol.MaxBoardLabels {
		es.add(key, "at most %d labels per agent (got %d)", protocol.MaxBoardLabels, len(labels))
		ok = false
	}
	seen := map[string]int{}
	for i, l := range labels {
		lk := fmt.Sprintf("%s[%d]", key, i)
		if !protocol.ValidBoardLabel(l) {
			es.add(lk, "must match %s (got %q)", protocol.BoardLabelRule, l)
			ok = false
		} else if j, dup := seen[l]; dup {
			es.add(lk, "duplicates %s[%d]: an agent's labels must be unique (got %q)", key, j, l)
			ok = false
		} else {
			seen[l] = i
		}
	}
	if !ok {
		return nil
	}
	return slices.Clone(labels)
}

// programJSON validates an agent program's argv and returns it as the JSON
// array the agent reads from AGENT_PROGRAM ("" for none).
func programJSON(es *errs, key string, argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	if !path.IsAbs(argv[0]) {
		es.add(key, "the program must be an absolute path in the agent's container, such as /shared/common/bin/my-agent (got %q)", argv[0])
		return ""
	}
	if len(argv) > 64 {
		es.add(key, "at most 64 arguments (got %d)", len(argv))
		return ""
	}
	for i, a := range argv {
		if a == "" || len(a) > 4096 || strings.ContainsRune(a, 0) {
			es.add(fmt.Sprintf("%s[%d]", key, i), "must be 1 to 4096 bytes with no NUL (got %d bytes)", len(a))
			return ""
		}
	}
	b, _ := json.Marshal(argv)
	return string(b)
}
