package replay

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"
)

// What the docker provider stores in a resource's state after it reads the
// resource back from the engine (terraform-provider-docker's
// resourceDockerContainerRead and resourceDockerNetworkReadRefreshFunc, at
// the commit pulumi-docker v4.10.0 pins), in pulumi-docker's input names.
// Pulumi diffs the declared inputs against that state: a declared value that
// reads back in another spelling shows as a change on every preview, and for
// an input that forces replacement (cpus, like most container inputs) every
// `pulumi up` replaces the resource. Inputs the provider does not read back
// (envs, labels of a container, networksAdvanced, mustRun, ...) keep their
// declared value and cannot drift; they are absent here.

// ContainerState is a container's state as the provider reads it back from
// its inspect document.
func ContainerState(doc map[string]any) map[string]any {
	cfg, _ := doc["Config"].(map[string]any)
	host, _ := doc["HostConfig"].(map[string]any)
	st := map[string]any{
		"name":          strings.TrimLeft(Str(doc["Name"]), "/"),
		"readOnly":      host["ReadonlyRootfs"] == true,
		"hostname":      cfg["Hostname"],
		"command":       cfg["Cmd"],
		"entrypoints":   cfg["Entrypoint"],
		"user":          cfg["User"],
		"dns":           host["Dns"],
		"securityOpts":  host["SecurityOpt"],
		"restart":       mapOf(host["RestartPolicy"])["Name"],
		"maxRetryCount": mapOf(host["RestartPolicy"])["MaximumRetryCount"],
		"init":          host["Init"] == true,
		"runtime":       host["Runtime"],
		"tmpfs":         host["Tmpfs"],
		"privileged":    host["Privileged"] == true,
		"memory":        float64(int64(numf(host["Memory"])) / 1024 / 1024),
		"cpuShares":     host["CpuShares"],
		"logDriver":     mapOf(host["LogConfig"])["Type"],
		"logOpts":       mapOf(host["LogConfig"])["Config"],
		"stopSignal":    cfg["StopSignal"],
		"stopTimeout":   cfg["StopTimeout"],
	}
	if swap := int64(numf(host["MemorySwap"])); swap > 0 {
		st["memorySwap"] = float64(swap / 1024 / 1024)
	} else {
		st["memorySwap"] = float64(swap)
	}
	if nano := int64(numf(host["NanoCpus"])); nano > 0 {
		st["cpus"] = nanoToDecimalString(nano)
	}
	if len(List(host["CapAdd"])) > 0 || len(List(host["CapDrop"])) > 0 {
		st["capabilities"] = map[string]any{"adds": host["CapAdd"], "drops": host["CapDrop"]}
	}
	var ulimits []any
	for _, u := range List(host["Ulimits"]) {
		um := mapOf(u)
		ulimits = append(ulimits, map[string]any{"name": um["Name"], "soft": um["Soft"], "hard": um["Hard"]})
	}
	st["ulimits"] = ulimits
	var mounts []any
	for _, m := range List(host["Mounts"]) {
		mm := mapOf(m)
		out := map[string]any{"target": mm["Target"], "source": mm["Source"], "type": mm["Type"], "readOnly": mm["ReadOnly"] == true}
		if bo, ok := mm["BindOptions"].(map[string]any); ok {
			out["bindOptions"] = map[string]any{"propagation": bo["Propagation"]}
		}
		mounts = append(mounts, out)
	}
	st["mounts"] = mounts
	if hc, ok := cfg["Healthcheck"].(map[string]any); ok {
		st["healthcheck"] = map[string]any{
			"tests":       hc["Test"],
			"interval":    time.Duration(numf(hc["Interval"])).String(),
			"timeout":     time.Duration(numf(hc["Timeout"])).String(),
			"startPeriod": time.Duration(numf(hc["StartPeriod"])).String(),
			"retries":     hc["Retries"],
		}
	}
	// Ports come from the running container's bindings, sorted by port.
	ports := []any{}
	bindings := mapOf(mapOf(doc["NetworkSettings"])["Ports"])
	keys := make([]string, 0, len(bindings))
	for k := range bindings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		port, proto, _ := strings.Cut(k, "/")
		for _, b := range List(bindings[k]) {
			bm := mapOf(b)
			var internal, external float64
			fmt.Sscan(port, &internal)
			fmt.Sscan(Str(bm["HostPort"]), &external)
			ports = append(ports, map[string]any{"internal": internal, "external": external, "ip": bm["HostIp"], "protocol": proto})
		}
	}
	st["ports"] = ports
	return st
}

// NetworkState is a network's state as the provider reads it back. The
// replay's own run label is not part of what was declared.
func NetworkState(doc map[string]any) map[string]any {
	var labels []any
	for k, v := range mapOf(doc["Labels"]) {
		if k != RunLabel {
			labels = append(labels, map[string]any{"label": k, "value": v})
		}
	}
	var ipam []any
	for _, c := range List(mapOf(doc["IPAM"])["Config"]) {
		cm := mapOf(c)
		out := map[string]any{}
		for field, key := range map[string]string{"Subnet": "subnet", "IPRange": "ipRange", "Gateway": "gateway"} {
			if v := Str(cm[field]); v != "" {
				out[key] = v
			}
		}
		ipam = append(ipam, out)
	}
	return map[string]any{
		"name": doc["Name"], "labels": labels, "driver": doc["Driver"], "internal": doc["Internal"] == true,
		"attachable": doc["Attachable"] == true, "ipv6": doc["EnableIPv6"] == true,
		"options": doc["Options"], "ipamConfigs": ipam,
	}
}

// setInputs are the inputs the provider keeps as sets: their order is not a change.
var setInputs = map[string]bool{
	"ulimits": true, "mounts": true, "labels": true, "ipamConfigs": true, "drops": true, "adds": true,
	"securityOpts": true, "dns": true,
}

// mapInputs are plain maps, compared whole; other objects are the provider's
// blocks, compared on the fields declared (the others are computed).
var mapInputs = map[string]bool{"tmpfs": true, "logOpts": true, "options": true}

// Drift lists every declared input whose value reads back differently from
// the engine: each would show as a change on the next preview.
func Drift(declared, state map[string]any) []string {
	var out []string
	for k, want := range declared {
		got, read := state[k]
		if !read {
			continue // not read back: it keeps its declared value
		}
		if a, b := canonical(k, want, want), canonical(k, got, want); a != b {
			out = append(out, fmt.Sprintf("%s: declared %s, reads back as %s", k, a, b))
		}
	}
	sort.Strings(out)
	return out
}

// canonical renders v as JSON for comparison, keeping only the keys the
// declared value (like) has in its objects, and sorting the elements of set
// inputs. Empty lists and maps equal a missing value, as in the provider.
func canonical(key string, v, like any) string {
	b, _ := json.Marshal(project(key, v, like))
	return string(b)
}

func project(key string, v, like any) any {
	switch l := like.(type) {
	case map[string]any:
		m := mapOf(v)
		if mapInputs[key] { // a map is compared whole: an extra key is a change
			if len(m) == 0 {
				return nil
			}
			return m
		}
		out := map[string]any{}
		for k, lv := range l {
			if p := project(k, m[k], lv); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var elem any
		if len(l) > 0 {
			elem = l[0]
		}
		// Objects of a list are projected on the keys any declared element has.
		if _, ok := elem.(map[string]any); ok {
			union := map[string]any{}
			for _, e := range l {
				for k, ev := range mapOf(e) {
					union[k] = ev
				}
			}
			elem = union
		}
		var out []string
		for _, e := range List(v) {
			b, _ := json.Marshal(project("", e, elem))
			out = append(out, string(b))
		}
		if len(out) == 0 {
			return nil
		}
		if setInputs[key] {
			sort.Strings(out)
		}
		return out
	default:
		switch x := v.(type) {
		case []any:
			if len(x) == 0 {
				return nil
			}
		case map[string]any:
			if len(x) == 0 {
				return nil
			}
		case int:
			return float64(x)
		case int64:
			return float64(x)
		}
		return v
	}
}

// nanoToDecimalString is the provider's nanoInt64ToDecimalString: a "round"
// value (nine zeros in its 9-decimal form) is written with one decimal, so
// one core reads back as "1.0" and 0.05 as "0.1". It is kept apart from
// flock.CPUString on purpose: the check must not share the code it checks.
func nanoToDecimalString(nano int64) string {
	if nano == 0 {
		return "0"
	}
	r := new(big.Rat).SetFrac64(nano, 1e9)
	s := r.FloatString(9)
	if strings.Count(s, "0") == 9 {
		return r.FloatString(1)
	}
	return strings.TrimRight(s, "0")
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func numf(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}
