package rules

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

// Stack policies look at every resource of the stack at once: what no single
// resource can show (two agents with one UID, a directory mounted by two
// agents) is found here.

func stackNothingPrivateShared(rs []Resource) []Finding {
	var out []Finding
	// docker: an agent's directory, log file and credentials are mounted by that
	// agent only; nobody mounts a directory above them; common is read-only everywhere.
	type private struct{ agent, what string }
	privates := map[string]private{}
	commons := map[string]bool{}
	ids, agents := agentContainers(rs)
	for _, id := range ids {
		for target, spec := range agentMounts(id) {
			m, ok := mountAt(agents[id], target)
			if !ok {
				continue
			}
			if target == protocol.ContainerCommonDir() {
				commons[m.source] = true
			} else {
				privates[m.source] = private{agent: id, what: spec.what}
			}
		}
	}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		self := ""
		if l := dockerLabels(c); l[protocol.LabelRole] == protocol.RoleAgent && agents[l[protocol.LabelAgent]].Name == c.Name {
			self = l[protocol.LabelAgent]
		}
		for _, m := range hostMounts(c) {
			for _, p := range slices.Sorted(maps.Keys(privates)) {
				pv := privates[p]
				if pv.agent != self && within(m.source, p) {
					out = append(out, c.finding(fmt.Sprintf("remove the mount of %s: only agent %s mounts its own %s, and no container mounts the shared root or the agents, logs or creds directories", m.source, pv.agent, strings.TrimPrefix(pv.what, "its own ")),
						"mounts the host path %s at %s, which holds agent %s's private %s (%s)", m.source, m.target, pv.agent, strings.TrimPrefix(pv.what, "its own "), p))
					break
				}
			}
			if commons[m.source] && !m.readOnly {
				out = append(out, c.finding("mount the common directory read-only (readOnly: true) in every container",
					"mounts the common directory %s read-write at %s: one agent could plant files every other agent reads", m.source, m.target))
			}
		}
	}

	// aws: an agent's access point is mounted by that agent's task only, no
	// task mounts a directory above another agent's, and an access point
	// mounted by several tasks is mounted read-only by all of them.
	apByID := map[string]Resource{}
	privateRoots := map[string]string{} // root path -> agent
	for _, ap := range byTypeSorted(rs, awsrules.TypeAccessPoint) {
		if id := resourceID(ap); id != "" {
			apByID[id] = ap
		}
		if a := apAgent(ap); a != "" {
			privateRoots[path.Clean(str(ap.get("rootDirectory", "path")))] = a
		}
	}
	users := map[string]map[string]bool{} // access point ID -> identities of the tasks mounting it
	identity := func(td Resource) string {
		if a := taskAgent(td); a != "" {
			return "agent " + a
		}
		return "task " + td.Name
	}
	tds := byTypeSorted(rs, awsrules.TypeTaskDefinition)
	for _, td := range tds {
		self := taskAgent(td)
		for _, m := range taskEFSMounts(td) {
			root := m.rootDir
			if m.accessPoint != "" {
				ap, ok := apByID[m.accessPoint]
				if !ok {
					continue
				}
				if users[m.accessPoint] == nil {
					users[m.accessPoint] = map[string]bool{}
				}
				users[m.accessPoint][identity(td)] = true
				root = path.Clean(str(ap.get("rootDirectory", "path")))
			}
			for _, p := range slices.Sorted(maps.Keys(privateRoots)) {
				if a := privateRoots[p]; a != self && within(root, p) {
					out = append(out, td.finding(fmt.Sprintf("mount only the task's own access point (and common read-only); agent %s's access point belongs to agent %s's task alone", a, a),
						"EFS volume %q reaches %s, which holds agent %s's private directory %s", m.volume, root, a, p))
					break
				}
			}
		}
	}
	for _, td := range tds {
		defs, _, _ := containerDefs(td)
		for _, m := range taskEFSMounts(td) {
			if len(users[m.accessPoint]) < 2 {
				continue
			}
			for _, c := range defs {
				for _, mp := range list(c["mountPoints"]) {
					mm := obj(mp)
					if str(mm["sourceVolume"]) == m.volume && !truthy(mm["readOnly"]) {
						out = append(out, td.finding("mount an access point that several tasks share (common) read-only in every one of them; private data gets an access point per agent",
							"container %q mounts the shared access point %q (volume %q, shared by %s) read-write at %s",
							str(c["name"]), apByID[m.accessPoint].Name, m.volume, strings.Join(slices.Sorted(maps.Keys(users[m.accessPoint])), ", "), describe(mm["containerPath"])))
					}
				}
			}
		}
	}
	return out
}

func stackPidsLimitStep(rs []Resource) []Finding {
	var out []Finding
	cmds := byTypeSorted(rs, TypeCommand)
	for _, c := range cmds {
		if isUnknown(c.get("create")) {
			return nil // a step we cannot read might be the one: decide on `pulumi up`
		}
	}
	ids, agents := agentContainers(rs)
	for _, id := range ids {
		c := agents[id]
		nameV := c.get("name")
		if isUnknown(nameV) || str(nameV) == "" {
			continue
		}
		name := str(nameV)
		if str(c.get("runtime")) == "runsc" {
			// Under gVisor the nproc ulimit is enforced by the sandbox's own
			// kernel, which holds this container's processes only: a per-container
			// limit. The host sees a fixed handful of runsc processes, and
			// runsc cannot take a docker update.
			continue
		}
		fix := fmt.Sprintf("declare a pulumi-command step that runs `docker update --pids-limit N %s` with the container's ID among its triggers (agent %s: infra/dockerflock does it in the first bus link step): pulumi-docker has no pidsLimit", name, id)
		re := regexp.MustCompile(`docker\s+update\s+(?:.*\s)?--pids-limit[ =](-?[0-9]+)\s+(?:.*\s)?` + regexp.QuoteMeta(name) + `(?:$|[\s;&|>])`)
		var step *Resource
		limit := ""
		for i := range cmds {
			if m := re.FindStringSubmatch(str(cmds[i].get("create"))); m != nil {
				step, limit = &cmds[i], m[1]
				break
			}
		}
		switch {
		case step == nil:
			out = append(out, c.finding(fix, "no step sets the cgroup PIDs limit of agent %s's container %q (docker update --pids-limit); the nproc ulimit alone is per UID, not per container", id, name))
		case strings.HasPrefix(limit, "-") || strings.TrimLeft(limit, "0") == "":
			out = append(out, c.finding(fix, "the step %q sets the PIDs limit of %q to %s, which is no limit", step.Name, name, limit))
		case c.URN != "" && !slices.Contains(step.Deps, c.URN):
			out = append(out, c.finding(fix, "the step %q does not depend on the container, so it does not run again when the container is replaced", step.Name))
		}
	}
	return out
}
