package rules

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

// Stack policies look at every resource of the stack at once: what no single
// resource can show (two agents with one UID, a directory mounted by two
// agents) is found here.

// --- docker ---------------------------------------------------------------

// agentContainers returns the agent containers of the stack keyed by agent ID.
func agentContainers(rs []Resource) (ids []string, byID map[string]Resource) {
	byID = map[string]Resource{}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		l := dockerLabels(c)
		if l[protocol.LabelRole] == protocol.RoleAgent && l[protocol.LabelAgent] != "" {
			if _, dup := byID[l[protocol.LabelAgent]]; !dup {
				ids = append(ids, l[protocol.LabelAgent])
			}
			byID[l[protocol.LabelAgent]] = c
		}
	}
	sort.Strings(ids)
	return ids, byID
}

// bindSources are the host paths a container mounts: target -> mount.
type hostMount struct {
	source, target string
	readOnly       bool
}

func hostMounts(c Resource) []hostMount {
	var out []hostMount
	for _, mt := range list(c.get("mounts")) {
		m := obj(mt)
		if str(m["type"]) != "bind" || isUnknown(m["source"]) || str(m["source"]) == "" {
			continue
		}
		out = append(out, hostMount{source: path.Clean(str(m["source"])), target: path.Clean(str(m["target"])), readOnly: truthy(m["readOnly"])})
	}
	for _, v := range list(c.get("volumes")) {
		m := obj(v)
		if hp := m["hostPath"]; !isUnknown(hp) && str(hp) != "" {
			out = append(out, hostMount{source: path.Clean(str(hp)), target: path.Clean(str(m["containerPath"])), readOnly: truthy(m["readOnly"])})
		}
	}
	return out
}

func mountAt(c Resource, target string) (hostMount, bool) {
	for _, m := range hostMounts(c) {
		if m.target == target {
			return m, true
		}
	}
	return hostMount{}, false
}

// --- aws ------------------------------------------------------------------

// taskAgent is the agent a task definition runs: its ai-flock.agent tag, or
// the AGENT_ID environment variable of its containers.
func taskAgent(td Resource) string {
	if id := awsTags(td)[protocol.LabelAgent]; id != "" {
		return id
	}
	defs, _, _ := containerDefs(td)
	for _, c := range defs {
		for _, e := range list(c["environment"]) {
			if m := obj(e); str(m["name"]) == protocol.EnvAgentID {
				return str(m["value"])
			}
		}
	}
	return ""
}

// taskUIDs are the numeric UIDs a task definition's containers run as.
func taskUIDs(td Resource) []int {
	defs, _, _ := containerDefs(td)
	var out []int
	seen := map[int]bool{}
	for _, c := range defs {
		if uid, _, ok := parseUser(str(c["user"])); ok && !seen[uid] {
			seen[uid] = true
			out = append(out, uid)
		}
	}
	return out
}

// agentRoot is an agent's private or log directory: the agent ID rule, inside a path.
var agentRoot = regexp.MustCompile(`^/(agents|logs)/(` + strings.TrimSuffix(strings.TrimPrefix(protocol.AgentIDRule, "^"), "$") + `)$`)

// apAgent is the agent whose private directory an access point serves ("" for others).
func apAgent(ap Resource) string {
	if m := agentRoot.FindStringSubmatch(path.Clean(str(ap.get("rootDirectory", "path")))); m != nil {
		return m[2]
	}
	return ""
}

// resourceID is the provider ID of a resource when its state carries one.
func resourceID(r Resource) string { return str(r.get("id")) }

type efsMount struct {
	volume      string
	accessPoint string // "" when mounted without one
	rootDir     string
}

func taskEFSMounts(td Resource) []efsMount {
	var out []efsMount
	for _, v := range efsVolumes(td) {
		efs := v["efsVolumeConfiguration"]
		ap := get(efs, "authorizationConfig", "accessPointId")
		if isUnknown(ap) {
			continue
		}
		root := str(get(efs, "rootDirectory"))
		if root == "" {
			root = "/"
		}
		out = append(out, efsMount{volume: str(v["name"]), accessPoint: str(ap), rootDir: path.Clean(root)})
	}
	return out
}

// --- the policies ---------------------------------------------------------

func stackUniqueAgentUID(rs []Resource) []Finding {
	const fix = "give every agent (and the bus) its own UID: the flock model derives it from the agent's slot (flock:uidBase + slot), so never reuse a slot or hard-code a user"
	var out []Finding
	// Who runs as a UID: each agent is its own; the nodes of a clustered
	// bus are one bus and share the bus's UID (slot 0).
	type owner struct{ who, name string }
	// docker: every flock container, agents and bus.
	seen := map[int]owner{}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		l := dockerLabels(c)
		if l[protocol.LabelRole] != protocol.RoleAgent && l[protocol.LabelRole] != protocol.RoleBus {
			continue
		}
		uid, _, ok := parseUser(str(c.get("user")))
		if !ok {
			continue
		}
		who := c.Name
		if l[protocol.LabelRole] == protocol.RoleBus && l[protocol.LabelAgent] == "" {
			who = protocol.RoleBus
		}
		if o, dup := seen[uid]; dup {
			if o.who != who {
				out = append(out, c.finding(fix, "runs as UID %d like %q: the two would share their nproc limit and the ownership of each other's files", uid, o.name))
			}
			continue
		}
		seen[uid] = owner{who, c.Name}
	}
	// aws: task definitions, and the access points of agents' private
	// directories (one agent may have several: its directory, its logs).
	seenTD := map[int]owner{}
	for _, td := range byTypeSorted(rs, TypeTaskDefinition) {
		who := taskAgent(td)
		if who == "" {
			who = "task " + td.Name
			if awsTags(td)[protocol.LabelRole] == protocol.RoleBus {
				who = protocol.RoleBus // every node of the bus
			}
		} else {
			who = "agent " + who
		}
		for _, uid := range taskUIDs(td) {
			if o, dup := seenTD[uid]; dup && o.who != who {
				out = append(out, td.finding(fix, "runs as UID %d like the task definition %q", uid, o.name))
				continue
			}
			seenTD[uid] = owner{who, td.Name}
		}
	}
	seenAP := map[float64]owner{}
	for _, ap := range byTypeSorted(rs, TypeAccessPoint) {
		who := apAgent(ap)
		if who == "" {
			continue
		}
		uid, ok := number(ap.get("posixUser", "uid"))
		if !ok {
			continue
		}
		if o, dup := seenAP[uid]; dup && o.who != who {
			out = append(out, ap.finding(fix, "forces the POSIX UID %v on agent %s's files, like the access point %q of agent %s", uid, who, o.name, o.who))
			continue
		}
		seenAP[uid] = owner{who, ap.Name}
	}
	return out
}

func stackAgentOwnDirectory(rs []Resource) []Finding {
	var out []Finding
	// docker: each agent mounts its own directory, from a host path no other agent mounts there.
	ids, agents := agentContainers(rs)
	bySource := map[string]string{}
	for _, id := range ids {
		c := agents[id]
		if isUnknown(c.get("mounts")) {
			continue
		}
		fix := fmt.Sprintf("bind-mount <shared>/agents/%s (owned by the agent's UID, 0700) read-write at %s, and only in agent %s", id, protocol.ContainerAgentDir(id), id)
		m, ok := mountAt(c, protocol.ContainerAgentDir(id))
		if !ok {
			out = append(out, c.finding(fix, "agent %s has no directory of its own mounted at %s", id, protocol.ContainerAgentDir(id)))
			continue
		}
		if other, dup := bySource[m.source]; dup {
			out = append(out, c.finding(fix, "agent %s's directory is the host path %s, which is agent %s's directory too", id, m.source, other))
			continue
		}
		bySource[m.source] = id
	}

	// aws: each agent's task has an access point of its own (root /agents/<id>,
	// its UID, 0700), and mounts it.
	aps := map[string]Resource{} // agent -> its directory's access point
	for _, ap := range byTypeSorted(rs, TypeAccessPoint) {
		root := path.Clean(str(ap.get("rootDirectory", "path")))
		id := apAgent(ap)
		if id == "" || !strings.HasPrefix(root, "/agents/") {
			continue
		}
		fix := fmt.Sprintf("declare exactly one access point per agent: root /agents/%s, posixUser and creationInfo owner the agent's UID, permissions 0700", id)
		if other, dup := aps[id]; dup {
			out = append(out, ap.finding(fix, "serves %s like the access point %q: agent %s's directory would have two doors", root, other.Name, id))
			continue
		}
		aps[id] = ap
		ci := ap.get("rootDirectory", "creationInfo")
		if isUnknown(ci) || ci == nil {
			continue
		}
		perm, owner, uid := str(get(ci, "permissions")), get(ci, "ownerUid"), ap.get("posixUser", "uid")
		if p := strings.TrimLeft(perm, "0"); perm != "" && p != "700" {
			out = append(out, ap.finding(fix, "creates agent %s's directory with permissions %s: other users could read it", id, perm))
		}
		if o, ok1 := number(owner); ok1 {
			if u, ok2 := number(uid); ok2 && o != u {
				out = append(out, ap.finding(fix, "creates agent %s's directory owned by UID %v, not the access point's POSIX user %v", id, o, u))
			}
		}
	}
	for _, td := range byTypeSorted(rs, TypeTaskDefinition) {
		id := taskAgent(td)
		if id == "" {
			continue
		}
		fix := fmt.Sprintf("declare an access point for agent %s (root /agents/%s, posixUser = its UID, 0700) and mount it in its task with transit encryption and IAM authorization", id, id)
		ap, ok := aps[id]
		if !ok {
			out = append(out, td.finding(fix, "agent %s has no access point of its own (root /agents/%s)", id, id))
			continue
		}
		if uid, ok := number(ap.get("posixUser", "uid")); ok {
			for _, t := range taskUIDs(td) {
				if float64(t) != uid {
					out = append(out, td.finding(fix, "agent %s runs as UID %d but its access point %q forces UID %v", id, t, ap.Name, uid))
				}
			}
		}
		if apID := resourceID(ap); apID != "" && !isUnknown(td.get("volumes")) {
			mounted := false
			for _, m := range taskEFSMounts(td) {
				mounted = mounted || m.accessPoint == apID
			}
			if !mounted {
				out = append(out, td.finding(fix, "agent %s's task does not mount its own access point %q", id, ap.Name))
			}
		}
	}
	return out
}

func stackAgentOwnNetwork(rs []Resource) []Finding {
	var out []Finding
	// docker: each agent joins exactly one network, its own, and no other container joins it.
	nets := map[string]Resource{}
	for _, n := range byTypeSorted(rs, TypeNetwork) {
		if name := str(n.get("name")); name != "" {
			nets[name] = n
		}
	}
	ids, agents := agentContainers(rs)
	owner := map[string]string{} // network name -> agent
	for _, id := range ids {
		c := agents[id]
		fix := fmt.Sprintf("attach agent %s to exactly one network, its own internal <flock>-%s-net labelled ai-flock.agent=%s, and attach no other container to it (the bus joins through its bus-link step)", id, id, id)
		attached := c.get("networksAdvanced")
		if isUnknown(attached) {
			continue
		}
		if n := len(list(attached)); n != 1 {
			out = append(out, c.finding(fix, "agent %s joins %d networks; an agent joins exactly its own", id, n))
			continue
		}
		nameV := get(list(attached)[0], "name")
		if isUnknown(nameV) {
			continue
		}
		name := str(nameV)
		n, ok := nets[name]
		if !ok {
			out = append(out, c.finding(fix, "agent %s joins the network %q, which this stack does not declare as its own", id, name))
			continue
		}
		if l := dockerLabels(n); l[protocol.LabelRole] != protocol.RoleAgent || l[protocol.LabelAgent] != id {
			out = append(out, c.finding(fix, "agent %s joins the network %q, which is labelled for %s %q, not for it", id, name, describe(l[protocol.LabelRole]), l[protocol.LabelAgent]))
			continue
		}
		owner[name] = id
	}
	for _, c := range byTypeSorted(rs, TypeContainer) {
		self := dockerLabels(c)[protocol.LabelAgent]
		for _, a := range list(c.get("networksAdvanced")) {
			name := get(a, "name")
			if isUnknown(name) {
				continue
			}
			if o, ok := owner[str(name)]; ok && (self != o || c.Name != agents[o].Name) {
				out = append(out, c.finding(fmt.Sprintf("detach it from %q: only agent %s (and the bus, through its bus-link step) may be on that network", str(name), o),
					"joins agent %s's network %q, so it can reach that agent directly", o, str(name)))
			}
		}
	}

	// aws: the security groups of agent services admit no ingress at all, so
	// no agent can reach another even when they share a group.
	agentTDs := map[string]bool{}
	for _, td := range byTypeSorted(rs, TypeTaskDefinition) {
		if taskAgent(td) != "" {
			for _, k := range []string{"arn", "id", "family"} {
				if v := str(td.get(k)); v != "" {
					agentTDs[v] = true
				}
			}
		}
	}
	sgByID := map[string]Resource{}
	agentSG := map[string]Resource{} // by resource name
	for _, sg := range byTypeSorted(rs, TypeSecurityGroup) {
		if id := resourceID(sg); id != "" {
			sgByID[id] = sg
		}
		if t := awsTags(sg); t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" {
			agentSG[sg.Name] = sg
		}
	}
	for _, svc := range byTypeSorted(rs, TypeService) {
		t := awsTags(svc)
		if !(t[protocol.LabelRole] == protocol.RoleAgent || t[protocol.LabelAgent] != "" || agentTDs[str(svc.get("taskDefinition"))]) {
			continue
		}
		groups := svc.get("networkConfiguration", "securityGroups")
		if isUnknown(groups) {
			continue
		}
		if len(list(groups)) == 0 {
			out = append(out, svc.finding("give agent services a security group with no ingress, egress only to the bus (4222), EFS (2049) and the AWS endpoints",
				"runs agent tasks without a security group of their own, so the VPC's default group (which admits itself) applies"))
			continue
		}
		for _, g := range list(groups) {
			if sg, ok := sgByID[str(g)]; ok {
				agentSG[sg.Name] = sg
			}
		}
	}
	const fix = "give agents' security groups no ingress at all (egress only to the bus, EFS and the AWS endpoints); the bus and EFS groups admit the agents' group instead"
	agentSGIDs := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(agentSG)) {
		sg := agentSG[name]
		if id := resourceID(sg); id != "" {
			agentSGIDs[id] = name
		}
		if in := sg.get("ingress"); !isUnknown(in) && len(list(in)) > 0 {
			out = append(out, sg.finding(fix, "is an agents' security group with %d ingress rules: agents could reach each other", len(list(in))))
		}
	}
	for _, rule := range append(byTypeSorted(rs, TypeSGIngressRule), byTypeSorted(rs, TypeSecurityGroupRule)...) {
		if rule.Type == TypeSecurityGroupRule && str(rule.get("type")) != "ingress" {
			continue
		}
		if sg, ok := agentSGIDs[str(rule.get("securityGroupId"))]; ok {
			out = append(out, rule.finding(fix, "adds ingress to the agents' security group %q: agents could be reached", sg))
		}
	}
	return out
}

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
	for _, ap := range byTypeSorted(rs, TypeAccessPoint) {
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
	tds := byTypeSorted(rs, TypeTaskDefinition)
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
		fix := fmt.Sprintf("declare a pulumi-command step (<flock>-%s-pids-limit) that runs `docker update --pids-limit N %s` with the container's ID among its triggers, as infra/dockerflock does: pulumi-docker has no pidsLimit", id, name)
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
		case c.URN != "" && !contains(step.Deps, c.URN):
			out = append(out, c.finding(fix, "the step %q does not depend on the container, so it does not run again when the container is replaced", step.Name))
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// coversPort reports whether an ingress rule's protocol and port range
// admit the TCP port. Unknown values are judged once they are known.
func coversPort(proto, from, to any, port int) bool {
	if isUnknown(proto) || isUnknown(from) || isUnknown(to) {
		return false
	}
	switch strings.ToLower(str(proto)) {
	case "-1", "all":
		return true
	case "tcp", "6":
		f, okF := number(from)
		t, okT := number(to)
		return okF && okT && f <= float64(port) && float64(port) <= t
	}
	return false
}

// stackBusRoutesSelfOnly: on aws the nodes of a clustered bus talk on the
// route port (protocol.RoutePort): whoever reaches it can join the cluster
// as a node and read or rewrite every stream. The bus's security group
// (tagged ai-flock.role=bus, or the group of a bus service) may admit that
// port from itself only: never from agents, the operator or an address range.
func stackBusRoutesSelfOnly(rs []Resource) []Finding {
	fix := fmt.Sprintf("admit the route port %d on the bus's security group from that group itself only (a rule whose source is the bus group, or self: true); agents and the operator reach the bus on %d", protocol.RoutePort, protocol.ClientPort)
	names := map[string]string{} // security group ID -> resource name
	busSG := map[string]bool{}
	for _, sg := range byTypeSorted(rs, TypeSecurityGroup) {
		id := resourceID(sg)
		if id == "" {
			continue
		}
		names[id] = sg.Name
		if awsTags(sg)[protocol.LabelRole] == protocol.RoleBus {
			busSG[id] = true
		}
	}
	for _, svc := range byTypeSorted(rs, TypeService) {
		if awsTags(svc)[protocol.LabelRole] != protocol.RoleBus {
			continue
		}
		for _, g := range strs(svc.get("networkConfiguration", "securityGroups")) {
			busSG[g] = true
		}
	}
	group := func(id string) string {
		if n, ok := names[id]; ok {
			return fmt.Sprintf("the security group %q", n)
		}
		return "the security group " + id
	}
	// others lists what an ingress rule of group own admits besides own itself.
	others := func(own string, self bool, groups []string, ranges ...any) []string {
		var out []string
		for _, g := range groups {
			if g != own {
				out = append(out, group(g))
			}
		}
		for _, r := range ranges {
			for _, c := range append(strs(r), str(r)) {
				if c != "" {
					out = append(out, c)
				}
			}
		}
		if !self && len(groups) == 0 && len(out) == 0 {
			out = append(out, "an unnamed peer")
		}
		return out
	}
	var out []Finding
	report := func(r Resource, own string, peers []string) {
		if len(peers) > 0 {
			out = append(out, r.finding(fix, "admits the NATS route port %d of the bus's group %s from %s: only the bus nodes may join the cluster",
				protocol.RoutePort, names[own], strings.Join(peers, ", ")))
		}
	}
	for _, sg := range byTypeSorted(rs, TypeSecurityGroup) {
		own := resourceID(sg)
		if !busSG[own] {
			continue
		}
		for _, in := range list(sg.get("ingress")) {
			m := obj(in)
			if coversPort(m["protocol"], m["fromPort"], m["toPort"], protocol.RoutePort) {
				report(sg, own, others(own, truthy(m["self"]), strs(m["securityGroups"]), m["cidrBlocks"], m["ipv6CidrBlocks"], m["prefixListIds"]))
			}
		}
	}
	for _, r := range byTypeSorted(rs, TypeSecurityGroupRule) {
		own := str(r.get("securityGroupId"))
		if str(r.get("type")) != "ingress" || !busSG[own] || !coversPort(r.get("protocol"), r.get("fromPort"), r.get("toPort"), protocol.RoutePort) {
			continue
		}
		var groups []string
		if src := r.get("sourceSecurityGroupId"); !isUnknown(src) && str(src) != "" {
			groups = []string{str(src)}
		}
		report(r, own, others(own, truthy(r.get("self")), groups, r.get("cidrBlocks"), r.get("ipv6CidrBlocks"), r.get("prefixListIds")))
	}
	for _, r := range byTypeSorted(rs, TypeSGIngressRule) {
		own := str(r.get("securityGroupId"))
		if !busSG[own] || !coversPort(r.get("ipProtocol"), r.get("fromPort"), r.get("toPort"), protocol.RoutePort) {
			continue
		}
		var groups []string
		if ref := r.get("referencedSecurityGroupId"); !isUnknown(ref) && str(ref) != "" {
			groups = []string{str(ref)}
		}
		report(r, own, others(own, false, groups, r.get("cidrIpv4"), r.get("cidrIpv6"), r.get("prefixListId")))
	}
	return out
}
