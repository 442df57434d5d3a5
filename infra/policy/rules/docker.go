package rules

import (
	"fmt"
	"strings"

	"github.com/ai-flock/ai-flock/protocol"
)

func describe(v any) string {
	if v == nil {
		return "not set"
	}
	return fmt.Sprintf("%v", v)
}

// normOpt normalises a docker security option: "seccomp=unconfined" and
// "seccomp:unconfined" are the same option.
func normOpt(o string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(o), "=", ":"))
}

func containerNonRootUser(r Resource) []Finding {
	v := r.get("user")
	if isUnknown(v) {
		return nil
	}
	const fix = `set user to the container's own non-root numeric "UID:GID" (an agent's comes from the flock model: flock:uidBase + its slot)`
	user := strings.TrimSpace(str(v))
	if user == "" {
		return []Finding{r.finding(fix, "user is not set, so the container runs as its image's default user (often root)")}
	}
	uid, gid, ok := parseUser(user)
	switch {
	case !ok:
		return []Finding{r.finding(fix, "user %q is not a numeric UID:GID; a user name can resolve to root inside the image", user)}
	case uid == 0 || gid == 0:
		return []Finding{r.finding(fix, "runs as root (user %q)", user)}
	}
	return nil
}

func containerReadOnlyRootfs(r Resource) []Finding {
	return r.mustBeTrue("readOnly", "set readOnly: true and give writable scratch space as size-capped noexec tmpfs at /tmp and /run",
		"the root filesystem is writable (readOnly is %s)")
}

func containerDropAllCapabilities(r Resource) []Finding {
	caps := r.get("capabilities")
	if isUnknown(caps) {
		return nil
	}
	const fix = `set capabilities.drops to ["ALL"] and add none`
	var out []Finding
	drops := get(caps, "drops")
	if !isUnknown(drops) {
		all := false
		for _, d := range strs(drops) {
			if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(d), "CAP_"), "ALL") {
				all = true
			}
		}
		if !all {
			out = append(out, r.finding(fix, "capabilities.drops is %s, not [\"ALL\"]", describe(drops)))
		}
	}
	if adds := get(caps, "adds"); !isUnknown(adds) && len(list(adds)) > 0 {
		out = append(out, r.finding(fix, "adds the capabilities %v", adds))
	}
	return out
}

func containerNoNewPrivileges(r Resource) []Finding {
	opts := r.get("securityOpts")
	if isUnknown(opts) {
		return nil
	}
	for _, o := range strs(opts) {
		if n := normOpt(o); n == "no-new-privileges" || n == "no-new-privileges:true" {
			return nil
		}
	}
	return []Finding{r.finding(`add "no-new-privileges:true" to securityOpts`,
		"securityOpts %s lack no-new-privileges:true, so a setuid binary in the image could raise its privileges", describe(opts))}
}

func containerNotPrivileged(r Resource) []Finding {
	if !truthy(r.get("privileged")) {
		return nil
	}
	return []Finding{r.finding("remove privileged (or set it to false)", "runs privileged: every device and capability of the host")}
}

func containerNoHostNamespaces(r Resource) []Finding {
	const fix = "leave networkMode, pidMode, ipcMode, usernsMode and cgroupnsMode unset so the container gets private namespaces (agents join their own network through networksAdvanced)"
	var out []Finding
	for _, k := range []string{"networkMode", "pidMode", "ipcMode"} {
		v := str(r.get(k))
		if v == "host" || strings.HasPrefix(v, "container:") {
			out = append(out, r.finding(fix, "%s is %q: it shares the host's or another container's %s namespace", k, v, strings.TrimSuffix(k, "Mode")))
		}
	}
	for _, k := range []string{"usernsMode", "cgroupnsMode"} {
		if v := str(r.get(k)); v == "host" {
			out = append(out, r.finding(fix, "%s is %q: it shares the host's %s namespace", k, v, strings.TrimSuffix(k, "Mode")))
		}
	}
	return out
}

func containerMemoryCPULimits(r Resource) []Finding {
	const fix = "set memory (MiB) and memorySwap equal to it, and a CPU quota with cpus, from the flock's limits"
	var out []Finding
	if mem := r.get("memory"); !isUnknown(mem) {
		m, ok := number(mem)
		if !ok || m <= 0 {
			out = append(out, r.finding(fix, "has no memory limit (memory is %s)", describe(mem)))
		} else if swap := r.get("memorySwap"); !isUnknown(swap) {
			if s, ok := number(swap); !ok || s != m {
				out = append(out, r.finding(fix, "memorySwap is %s, not equal to memory %v: the container can swap beyond its memory limit", describe(swap), m))
			}
		}
	}
	cpus, quota := r.get("cpus"), r.get("cpuQuota")
	if !isUnknown(cpus) && !isUnknown(quota) {
		c, _ := number(cpus)
		q, _ := number(quota)
		if c <= 0 && q <= 0 {
			out = append(out, r.finding(fix, "has no CPU limit (cpus is %s)", describe(cpus)))
		}
	}
	return out
}

func containerProcessLimit(r Resource) []Finding {
	ul := r.get("ulimits")
	if isUnknown(ul) {
		return nil
	}
	const fix = "add the ulimit {name: nproc, soft: N, hard: N} with the agent's process limit, and keep the per-container pids-limit step (docker update --pids-limit N) that sets the cgroup PIDs limit"
	for _, u := range list(ul) {
		m := obj(u)
		if str(m["name"]) != "nproc" {
			continue
		}
		if isUnknown(m["soft"]) || isUnknown(m["hard"]) {
			return nil
		}
		soft, okS := number(m["soft"])
		hard, okH := number(m["hard"])
		if !okS || !okH || soft <= 0 || hard <= 0 || soft > hard {
			return []Finding{r.finding(fix, "the nproc ulimit (soft %s, hard %s) does not bound the process count", describe(m["soft"]), describe(m["hard"]))}
		}
		return nil
	}
	return []Finding{r.finding(fix, "has no nproc ulimit, so nothing bounds its process count (a fork bomb takes the host)")}
}

// busPublishable are the bus ports that may be published, on loopback only.
var busPublishable = map[float64]string{
	protocol.ClientPort:  "the operator port",
	protocol.MonitorPort: "the monitoring port",
	protocol.MetricsPort: "the metrics relay",
}

const loopback = "127.0.0.1"

func containerPublishedPorts(r Resource) []Finding {
	role := dockerLabels(r)[protocol.LabelRole]
	const fix = "remove the published port: agents are reached only through the bus; only the bus may publish 4222 (operator), 8222 (monitoring) and 9464 (metrics), each with ip 127.0.0.1"
	var out []Finding
	if truthy(r.get("publishAllPorts")) {
		out = append(out, r.finding(fix, "publishAllPorts is true: every exposed port is published on every host address"))
	}
	ports := r.get("ports")
	if isUnknown(ports) {
		return out
	}
	for _, p := range list(ports) {
		m := obj(p)
		internal, ip := m["internal"], m["ip"]
		if isUnknown(internal) || isUnknown(ip) {
			continue
		}
		n, _ := number(internal)
		if _, ok := busPublishable[n]; ok && role == protocol.RoleBus && str(ip) == loopback {
			continue
		}
		host := str(ip)
		if host == "" {
			host = "every host address (ip not set)"
		}
		out = append(out, r.finding(fix, "publishes container port %s on %s", describe(internal), host))
	}
	return out
}

func containerNotDefaultBridge(r Resource) []Finding {
	mode, nets := r.get("networkMode"), r.get("networksAdvanced")
	if isUnknown(mode) || isUnknown(nets) || len(list(nets)) > 0 {
		// With networksAdvanced the provider moves the container off the
		// default bridge onto its own networks before starting it (networkMode
		// then stays at the provider's default, "bridge").
		return nil
	}
	const fix = "attach the container to its own network with networksAdvanced (an agent: its internal <flock>-<agent>-net) and leave networkMode unset"
	switch m := str(mode); m {
	case "", "bridge", "default":
		return []Finding{r.finding(fix, "joins no network of its own (networkMode %s, networksAdvanced empty), so it runs on the default bridge, where every container can reach every other", describe(mode))}
	}
	return nil // "none", a user-defined network by name; "host" and "container:" are container-no-host-namespaces'
}

var unconfined = map[string]bool{
	"seccomp:unconfined": true, "apparmor:unconfined": true, "label:disable": true, "systempaths:unconfined": true,
}

func containerNoUnconfinedProfile(r Resource) []Finding {
	opts := r.get("securityOpts")
	if isUnknown(opts) {
		return nil
	}
	var out []Finding
	for _, o := range strs(opts) {
		if unconfined[normOpt(o)] {
			out = append(out, r.finding(fmt.Sprintf("remove %q from securityOpts and keep the engine's default seccomp and AppArmor profiles", o),
				"securityOpts has %q, which turns a kernel confinement off", o))
		}
	}
	return out
}

func containerHealthcheck(r Resource) []Finding {
	hc := r.get("healthcheck")
	if isUnknown(hc) {
		return nil
	}
	const fix = `add a healthcheck with an exec-form test, e.g. tests ["CMD", "/flock-agent", "health"]`
	tests := get(hc, "tests")
	if isUnknown(tests) {
		return nil
	}
	t := strs(tests)
	switch {
	case len(t) == 0:
		return []Finding{r.finding(fix, "has no healthcheck, so a hung process is never noticed")}
	case strings.EqualFold(t[0], "NONE"):
		return []Finding{r.finding(fix, "disables the image's healthcheck (tests [\"NONE\"])")}
	}
	return nil
}

func dockerFlockLabels(r Resource) []Finding {
	if isUnknown(r.get("labels")) {
		return nil
	}
	labels := dockerLabels(r)
	const fix = "label it ai-flock.flock=<flock name>, ai-flock.role=agent, bus, services, gateway or egress and, for an agent, ai-flock.agent=<agent ID>, as infra/dockerflock does; the per-agent policies recognise agents by these labels"
	var out []Finding
	if labels[protocol.LabelFlock] == "" {
		out = append(out, r.finding(fix, "has no %s label", protocol.LabelFlock))
	}
	switch role := labels[protocol.LabelRole]; role {
	case protocol.RoleAgent:
		if id := labels[protocol.LabelAgent]; !protocol.ValidAgentID(id) {
			out = append(out, r.finding(fix, "is an agent whose %s label %q is not an agent ID", protocol.LabelAgent, id))
		}
	case protocol.RoleBus, protocol.RoleServices, protocol.RoleGateway, protocol.RoleEgress:
	default:
		out = append(out, r.finding(fix, "has the %s label %q, not %q, %q, %q, %q or %q", protocol.LabelRole, role, protocol.RoleAgent, protocol.RoleBus, protocol.RoleServices, protocol.RoleGateway, protocol.RoleEgress))
	}
	return out
}

func networkAgentInternal(r Resource) []Finding {
	if dockerLabels(r)[protocol.LabelRole] != protocol.RoleAgent {
		return nil
	}
	return r.mustBeTrue("internal", "set internal: true (and the option com.docker.network.bridge.inhibit_ipv4=true) so the agent's network has no route out and no gateway on the host",
		"is an agent network that is not internal (internal is %s): the agent can reach the host and the internet")
}
