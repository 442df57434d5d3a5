package rules

import (
	"fmt"
	"path"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

// Host paths no container may mount: the engine's socket and state, and the
// host's system directories (exactly, or anything under them).
var (
	sensitiveTrees = []string{"/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var/run", "/var/lib/docker", "/var/lib/containerd"}
	sensitiveExact = []string{"/", "/home", "/var", "/srv", "/opt", "/mnt", "/media", "/tmp"}
)

func sensitiveHostPath(p string) bool {
	p = path.Clean(p)
	if strings.HasSuffix(p, ".sock") {
		return true
	}
	for _, s := range sensitiveExact {
		if p == s {
			return true
		}
	}
	for _, s := range sensitiveTrees {
		if within(s, p) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func containerNoSensitiveHostPaths(r Resource) []Finding {
	const fix = "remove the mount: never give a container the Docker socket, the engine's state or a host system directory; agents get only their own shared directories"
	var out []Finding
	if mounts := r.get("mounts"); !isUnknown(mounts) {
		for _, mt := range list(mounts) {
			m := obj(mt)
			src := m["source"]
			if str(m["type"]) != "bind" || isUnknown(src) || str(src) == "" {
				continue
			}
			if sensitiveHostPath(str(src)) {
				out = append(out, r.finding(fix, "bind-mounts the host path %s at %s", str(src), describe(m["target"])))
			}
		}
	}
	if vols := r.get("volumes"); !isUnknown(vols) {
		for _, v := range list(vols) {
			m := obj(v)
			if hp := m["hostPath"]; !isUnknown(hp) && str(hp) != "" && sensitiveHostPath(str(hp)) {
				out = append(out, r.finding(fix, "mounts the host path %s at %s as a volume", str(hp), describe(m["containerPath"])))
			}
		}
	}
	if devs := r.get("devices"); !isUnknown(devs) && len(list(devs)) > 0 {
		for _, d := range list(devs) {
			out = append(out, r.finding(fix, "passes the host device %s into the container", describe(get(d, "hostPath"))))
		}
	}
	return out
}

// agentMount is one mount an agent container may have.
type agentMount struct {
	what      string // for messages
	srcSuffix string // the host path must end so
	readOnly  bool   // must be mounted read-only
}

// agentMounts are the only mounts of agent id: target -> what it must be.
func agentMounts(id string) map[string]agentMount {
	return map[string]agentMount{
		protocol.ContainerAgentDir(id): {what: "its own directory", srcSuffix: "/agents/" + id},
		protocol.ContainerLogFile(id):  {what: "its own log file", srcSuffix: "/logs/" + id + "/" + id + ".log"},
		protocol.ContainerCredsDir:     {what: "its own credentials", srcSuffix: "/creds/" + id, readOnly: true},
		protocol.ContainerCommonDir():  {what: "the common directory", srcSuffix: "/common", readOnly: true},
	}
}

func containerOwnSharedDirs(r Resource) []Finding {
	labels := dockerLabels(r)
	id := labels[protocol.LabelAgent]
	if labels[protocol.LabelRole] != protocol.RoleAgent || id == "" { // docker-flock-labels reports agents without an ID
		return nil
	}
	allowed := agentMounts(id)
	fix := fmt.Sprintf("mount only %s (read-write), %s, %s and %s read-only, each from agent %s's own host path, never the shared root or another agent's",
		protocol.ContainerAgentDir(id), protocol.ContainerLogFile(id), protocol.ContainerCredsDir, protocol.ContainerCommonDir(), id)
	var out []Finding
	if mounts := r.get("mounts"); !isUnknown(mounts) {
		for _, mt := range list(mounts) {
			m := obj(mt)
			typ, target, src := str(m["type"]), m["target"], m["source"]
			if typ == "tmpfs" || isUnknown(target) {
				continue
			}
			t := path.Clean(str(target))
			spec, ok := allowed[t]
			if !ok {
				out = append(out, r.finding(fix, "mounts %s at %s, which is none of the agent's own mounts", describe(src), t))
				continue
			}
			if typ != "bind" {
				out = append(out, r.finding(fix, "mounts %s at %s as a %q mount, not a bind mount of %s", describe(src), t, typ, spec.what))
				continue
			}
			if !isUnknown(src) && !strings.HasSuffix(path.Clean(str(src)), spec.srcSuffix) {
				out = append(out, r.finding(fix, "mounts the host path %s at %s, which is not %s (a path ending in %s)", describe(src), t, spec.what, spec.srcSuffix))
			}
			if ro := m["readOnly"]; spec.readOnly && !isUnknown(ro) && !truthy(ro) {
				out = append(out, r.finding(fix, "mounts %s at %s read-write; it must be read-only", spec.what, t))
			}
		}
	}
	if vols := r.get("volumes"); !isUnknown(vols) && len(list(vols)) > 0 {
		out = append(out, r.finding(fix, "declares volumes %v; an agent gets host data only through its own bind mounts", vols))
	}
	return out
}
