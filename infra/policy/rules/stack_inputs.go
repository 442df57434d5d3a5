package rules

import (
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/ai-flock/ai-flock/infra/awsrules"
	"github.com/ai-flock/ai-flock/protocol"
)

// What the stack policies read from the resources.

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

// agentTaskDefinitions are the ARNs, IDs and families of the agents' task
// definitions: what a service's taskDefinition may name.
func agentTaskDefinitions(rs []Resource) map[string]bool {
	refs := map[string]bool{}
	for _, td := range byTypeSorted(rs, awsrules.TypeTaskDefinition) {
		if taskAgent(td) != "" {
			for _, k := range []string{"arn", "id", "family"} {
				if v := str(td.get(k)); v != "" {
					refs[v] = true
				}
			}
		}
	}
	return refs
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
