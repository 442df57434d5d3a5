// Networks and containers: the Engine API requests the docker provider
// makes of their inputs.

package replay

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ai-flock/ai-flock/tests/capture"
)

func labelMap(v any, extra map[string]string) map[string]string {
	m := map[string]string{}
	for _, l := range List(v) {
		lm := l.(map[string]any)
		m[Str(lm["label"])] = Str(lm["value"])
	}
	for k, val := range extra {
		m[k] = val
	}
	return m
}

// networkRequest is the Engine API create request for a network's declared
// inputs, as the docker provider builds it.
func networkRequest(in map[string]any) map[string]any {
	var ipam []map[string]any
	for _, c := range List(in["ipamConfigs"]) {
		cm := c.(map[string]any)
		ipam = append(ipam, map[string]any{"Subnet": Str(cm["subnet"]), "Gateway": Str(cm["gateway"]), "IPRange": Str(cm["ipRange"])})
	}
	opts := map[string]string{}
	if o, ok := in["options"].(map[string]any); ok {
		for k, v := range o {
			opts[k] = Str(v)
		}
	}
	return map[string]any{
		"Name": Str(in["name"]), "Driver": Str(in["driver"]), "Internal": in["internal"] == true,
		"Attachable": in["attachable"] == true, "EnableIPv6": in["ipv6"] == true, "CheckDuplicate": true,
		"IPAM": map[string]any{"Driver": "default", "Config": ipam}, "Options": opts,
		"Labels": labelMap(in["labels"], map[string]string{RunLabel: "1"}),
	}
}

func (f *Deployment) network(ctx context.Context, r capture.Resource) error {
	req := networkRequest(Inputs(r))
	id, err := f.Engine.CreateNetwork(ctx, req)
	if err != nil {
		return err
	}
	f.Networks[r.Name] = id
	f.created = append(f.created, created{typ: r.Type, name: r.Name, id: id})
	return nil
}

// container maps pulumi-docker Container inputs onto the Engine API the way
// the docker provider does (terraform-provider-docker's container create):
// memory and memorySwap are MiB, cpus becomes NanoCPUs, the container is
// created on the default bridge, disconnected from it and connected to each
// networksAdvanced entry before it starts.
func (f *Deployment) container(ctx context.Context, r capture.Resource) error {
	in := Inputs(r)
	image := Str(in["image"])
	if real, ok := f.Images[image]; ok {
		image = real
	} else {
		return fmt.Errorf("image %q was not built by this replay", image)
	}
	config, err := containerRequest(in, image)
	if err != nil {
		return err
	}
	name := Str(in["name"])
	id, err := f.Engine.CreateContainer(ctx, name, config)
	if err != nil {
		return err
	}
	f.Containers[r.Name] = id
	f.created = append(f.created, created{typ: r.Type, name: r.Name, id: id})
	if nets := List(in["networksAdvanced"]); len(nets) > 0 {
		if err := f.Engine.DisconnectNetwork(ctx, "bridge", id); err != nil && !strings.Contains(err.Error(), "is not connected") {
			return fmt.Errorf("disconnect default bridge: %w", err)
		}
		for _, n := range nets {
			nm := n.(map[string]any)
			ipam := map[string]any{}
			if ip := Str(nm["ipv4Address"]); ip != "" {
				ipam["IPv4Address"] = ip
			}
			if err := f.Engine.ConnectNetwork(ctx, Str(nm["name"]), id, map[string]any{"Aliases": Strs(nm["aliases"]), "IPAMConfig": ipam}); err != nil {
				return fmt.Errorf("connect %s: %w", Str(nm["name"]), err)
			}
		}
	}
	if err := f.Engine.Start(ctx, id); err != nil {
		return err
	}
	if in["mustRun"] == true {
		st, err := f.Engine.Inspect(ctx, id)
		if err != nil {
			return err
		}
		if running, _ := st["State"].(map[string]any)["Running"].(bool); !running {
			return fmt.Errorf("container %s is not running after start: %v", name, st["State"])
		}
	}
	return nil
}

// containerRequest is the Engine API create request for a container's
// declared inputs, as the docker provider builds it.
func containerRequest(in map[string]any, image string) (map[string]any, error) {
	config := map[string]any{
		"Image": image, "Hostname": Str(in["hostname"]), "User": Str(in["user"]),
		"Env": Strs(in["envs"]), "Labels": labelMap(in["labels"], map[string]string{RunLabel: "1"}),
	}
	if v := Strs(in["command"]); len(v) > 0 {
		config["Cmd"] = v
	}
	if v := Strs(in["entrypoints"]); len(v) > 0 {
		config["Entrypoint"] = v
	}
	if v := Str(in["stopSignal"]); v != "" {
		config["StopSignal"] = v
	}
	if v, ok := in["stopTimeout"].(float64); ok {
		config["StopTimeout"] = int(v)
	}
	if hc, ok := in["healthcheck"].(map[string]any); ok {
		h := map[string]any{"Test": Strs(hc["tests"]), "Retries": Num(hc["retries"])}
		for k, field := range map[string]string{"interval": "Interval", "timeout": "Timeout", "startPeriod": "StartPeriod"} {
			if s := Str(hc[k]); s != "" {
				d, err := time.ParseDuration(s)
				if err != nil {
					return nil, fmt.Errorf("healthcheck.%s: %w", k, err)
				}
				h[field] = d.Nanoseconds()
			}
		}
		config["Healthcheck"] = h
	}
	host := map[string]any{
		"ReadonlyRootfs": in["readOnly"] == true, "Privileged": in["privileged"] == true,
		"SecurityOpt": Strs(in["securityOpts"]), "Runtime": Str(in["runtime"]), "Dns": Strs(in["dns"]),
		"RestartPolicy": map[string]any{"Name": Str(in["restart"]), "MaximumRetryCount": Num(in["maxRetryCount"])},
		"LogConfig":     map[string]any{"Type": Str(in["logDriver"]), "Config": StrMap(in["logOpts"])},
		"Tmpfs":         StrMap(in["tmpfs"]),
		"Memory":        int64(Num(in["memory"])) << 20,
		"CpuShares":     Num(in["cpuShares"]),
	}
	if init, ok := in["init"].(bool); ok {
		host["Init"] = init
	}
	if swap := int64(Num(in["memorySwap"])); swap > 0 {
		host["MemorySwap"] = swap << 20
	}
	if c := Str(in["cpus"]); c != "" {
		// As the provider does (docker's opts.ParseCPUs): exact decimal, no float rounding.
		r, ok := new(big.Rat).SetString(c)
		if !ok {
			return nil, fmt.Errorf("cpus %q: not a decimal number", c)
		}
		nano := r.Mul(r, big.NewRat(1e9, 1))
		if !nano.IsInt() {
			return nil, fmt.Errorf("cpus %q: value is too precise", c)
		}
		host["NanoCpus"] = nano.Num().Int64()
	}
	if caps, ok := in["capabilities"].(map[string]any); ok {
		host["CapDrop"], host["CapAdd"] = Strs(caps["drops"]), Strs(caps["adds"])
	}
	var ulimits []map[string]any
	for _, u := range List(in["ulimits"]) {
		um := u.(map[string]any)
		ulimits = append(ulimits, map[string]any{"Name": Str(um["name"]), "Soft": Num(um["soft"]), "Hard": Num(um["hard"])})
	}
	host["Ulimits"] = ulimits
	var mounts []map[string]any
	for _, m := range List(in["mounts"]) {
		mm := m.(map[string]any)
		mount := map[string]any{"Type": Str(mm["type"]), "Source": Str(mm["source"]), "Target": Str(mm["target"]), "ReadOnly": mm["readOnly"] == true}
		if bo, ok := mm["bindOptions"].(map[string]any); ok {
			mount["BindOptions"] = map[string]any{"Propagation": Str(bo["propagation"])}
		}
		mounts = append(mounts, mount)
	}
	host["Mounts"] = mounts
	exposed, bindings := map[string]any{}, map[string]any{}
	for _, p := range List(in["ports"]) {
		pm := p.(map[string]any)
		proto := Str(pm["protocol"])
		if proto == "" {
			proto = "tcp"
		}
		key := fmt.Sprintf("%d/%s", Num(pm["internal"]), proto)
		exposed[key] = map[string]any{}
		bindings[key] = []map[string]any{{"HostIp": Str(pm["ip"]), "HostPort": strconv.Itoa(Num(pm["external"]))}}
	}
	if len(exposed) > 0 {
		config["ExposedPorts"] = exposed
		host["PortBindings"] = bindings
	}
	config["HostConfig"] = host
	return config, nil
}
