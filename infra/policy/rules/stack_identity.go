package rules

import (
	"fmt"
	"path"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

func stackUniqueAgentUID(rs []Resource) []Finding {
	const fix = "give every agent (and the bus) its own UID: the flock model derives it from the agent's slot (flock:uidBase + slot), so never reuse a slot or hard-code a user"
	var out []Finding
	// docker: every flock container, agents and bus.
	containers := uidOwners[int]{}
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
		if o, shared := containers.claim(uid, who, c.Name); shared {
			out = append(out, c.finding(fix, "runs as UID %d like %q: the two would share their nproc limit and the ownership of each other's files", uid, o.name))
		}
	}
	// aws: task definitions, and the access points of agents' private
	// directories (one agent may have several: its directory, its logs).
	tasks := uidOwners[int]{}
	for _, td := range byTypeSorted(rs, awsrules.TypeTaskDefinition) {
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
			if o, shared := tasks.claim(uid, who, td.Name); shared {
				out = append(out, td.finding(fix, "runs as UID %d like the task definition %q", uid, o.name))
			}
		}
	}
	accessPoints := uidOwners[float64]{}
	for _, ap := range byTypeSorted(rs, awsrules.TypeAccessPoint) {
		who := apAgent(ap)
		if who == "" {
			continue
		}
		uid, ok := number(ap.get("posixUser", "uid"))
		if !ok {
			continue
		}
		if o, shared := accessPoints.claim(uid, who, ap.Name); shared {
			out = append(out, ap.finding(fix, "forces the POSIX UID %v on agent %s's files, like the access point %q of agent %s", uid, who, o.name, o.who))
		}
	}
	return out
}

// uidOwners is who runs as each UID. Each agent is its own owner; the nodes
// of a clustered bus are one bus and share the bus's UID (slot 0).
type uidOwners[K comparable] map[K]uidOwner

type uidOwner struct{ who, name string }

// claim records that who runs as uid (name: the resource that says so),
// unless someone does already; shared is true, with that first owner, when
// it is someone else.
func (u uidOwners[K]) claim(uid K, who, name string) (first uidOwner, shared bool) {
	if o, ok := u[uid]; ok {
		return o, o.who != who
	}
	u[uid] = uidOwner{who, name}
	return uidOwner{}, false
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
	for _, ap := range byTypeSorted(rs, awsrules.TypeAccessPoint) {
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
	for _, td := range byTypeSorted(rs, awsrules.TypeTaskDefinition) {
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
