// Package replay creates the dev stack's declared resources, as captured
// under Pulumi's mock engine, on a real Docker engine: each pulumi-docker
// input becomes the Engine API field the docker provider sets, each
// pulumi-command step runs its script. An input it does not know fails the
// replay by name, so the e2e suite can never silently test less than the
// stack declares.
package replay

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

// RunLabel marks everything a replay creates, so leftovers of an earlier,
// interrupted run can be found and removed.
const RunLabel = "ai-flock.e2e"

// Flock is a replayed flock.
type Flock struct {
	Engine     *Engine
	Root       string            // project root (relative build contexts)
	Images     map[string]string // mock digest -> built image ID
	Containers map[string]string // logical name -> container ID
	Networks   map[string]string // logical name -> network ID
	created    []created         // what was created, in order: torn down in reverse
	Log        func(format string, args ...any)
}

// created is one resource the replay made, and how to delete it.
type created struct {
	typ, name string
	id        string            // container or network ID
	script    string            // a command's delete step
	env       map[string]string // its environment
}

// Known inputs per resource type. Anything else in a capture fails the replay.
var known = map[string]map[string]bool{
	capture.TypeImage: set("imageName", "build", "skipPush",
		"buildOnPreview"), // preview-only: nothing to do on the engine
	capture.TypeCommand: set("create", "delete", "stdin", "environment", "triggers"),
	capture.TypeNetwork: set("name", "driver", "internal", "ipamConfigs", "options", "labels", "attachable", "ipv6"),
	capture.TypeContainer: set("name", "hostname", "image", "user", "envs", "mounts", "networksAdvanced", "ports",
		"healthcheck", "labels", "readOnly", "tmpfs", "capabilities", "securityOpts", "privileged", "memory",
		"memorySwap", "cpus", "cpuShares", "ulimits", "init", "restart", "maxRetryCount", "logDriver", "logOpts",
		"stopSignal", "stopTimeout", "destroyGraceSeconds", "mustRun", "runtime", "command", "entrypoints", "dns"),
}

var nested = map[string]map[string]bool{
	"build":            set("context", "dockerfile", "target", "platform", "args", "builderVersion"),
	"ipamConfigs":      set("subnet", "gateway", "ipRange"),
	"mounts":           set("type", "source", "target", "readOnly", "bindOptions"),
	"bindOptions":      set("propagation"),
	"networksAdvanced": set("name", "aliases", "ipv4Address"),
	"ports":            set("internal", "external", "ip", "protocol"),
	"healthcheck":      set("tests", "interval", "timeout", "startPeriod", "retries"),
	"capabilities":     set("drops", "adds"),
	"ulimits":          set("name", "soft", "hard"),
	"labels":           set("label", "value"),
}

// skipped are resource types with nothing to create on the engine.
var skipped = map[string]bool{capture.TypeFlock: true, capture.TypeStack: true}

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Check fails on any resource type or input the replay does not map.
func Check(s *capture.Stack) error {
	var problems []string
	for _, r := range s.Resources {
		if skipped[r.Type] || strings.HasPrefix(r.Type, "pulumi:providers:") {
			continue
		}
		keys, ok := known[r.Type]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s %s: resource type not mapped by the replay", r.Type, r.Name))
			continue
		}
		for k, v := range r.Inputs {
			if !keys[string(k)] {
				problems = append(problems, fmt.Sprintf("%s %s: input %q is not mapped by the replay", r.Type, r.Name, k))
				continue
			}
			problems = append(problems, checkNested(r, string(k), plain(v))...)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("replay: %s", strings.Join(problems, "; "))
	}
	return nil
}

func checkNested(r capture.Resource, key string, v any) []string {
	keys, ok := nested[key]
	if !ok {
		return nil
	}
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case map[string]any:
		items = []any{x}
	}
	var problems []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		for k, sub := range m {
			if !keys[k] {
				problems = append(problems, fmt.Sprintf("%s %s: input %s.%s is not mapped by the replay", r.Type, r.Name, key, k))
			}
			problems = append(problems, checkNested(r, k, sub)...)
		}
	}
	return problems
}

// plain turns a property value into plain Go values, unwrapping secrets.
func plain(v resource.PropertyValue) any {
	switch {
	case v.IsSecret():
		return plain(v.SecretValue().Element)
	case v.IsObject():
		m := map[string]any{}
		for k, e := range v.ObjectValue() {
			m[string(k)] = plain(e)
		}
		return m
	case v.IsArray():
		var l []any
		for _, e := range v.ArrayValue() {
			l = append(l, plain(e))
		}
		return l
	case v.IsComputed() || v.IsOutput():
		if v.IsOutput() && v.OutputValue().Known {
			return plain(v.OutputValue().Element)
		}
		return nil
	default:
		return v.Mappable()
	}
}

// Inputs are a resource's declared inputs as plain Go values.
func Inputs(r capture.Resource) map[string]any {
	m := map[string]any{}
	for k, v := range r.Inputs {
		m[string(k)] = plain(v)
	}
	return m
}

// Replay creates every declared resource in dependency order.
func Replay(ctx context.Context, e *Engine, s *capture.Stack, root string, logf func(string, ...any)) (*Flock, error) {
	if err := Check(s); err != nil {
		return nil, err
	}
	f := &Flock{Engine: e, Root: root, Images: map[string]string{}, Containers: map[string]string{}, Networks: map[string]string{}, Log: logf}
	order, err := topo(s)
	if err != nil {
		return nil, err
	}
	for _, r := range order {
		start := time.Now()
		switch r.Type {
		case capture.TypeImage:
			err = f.image(ctx, r)
		case capture.TypeCommand:
			err = f.command(ctx, r)
		case capture.TypeNetwork:
			err = f.network(ctx, r)
		case capture.TypeContainer:
			err = f.container(ctx, r)
		default:
			continue
		}
		if err != nil {
			return f, fmt.Errorf("replay %s %s: %w", r.Type, r.Name, err)
		}
		f.Log("replayed %s %s in %s", r.Type, r.Name, time.Since(start).Round(time.Millisecond))
	}
	return f, nil
}

// topo orders resources so each comes after its dependencies.
func topo(s *capture.Stack) ([]capture.Resource, error) {
	byURN := map[string]int{}
	for i, r := range s.Resources {
		byURN[r.Name] = i
	}
	name := func(urn string) string { return urn[strings.LastIndex(urn, "::")+2:] }
	state := make([]int, len(s.Resources)) // 0 new, 1 visiting, 2 done
	var out []capture.Resource
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("replay: dependency cycle at %s", s.Resources[i].Name)
		case 2:
			return nil
		}
		state[i] = 1
		for _, d := range s.Resources[i].Deps {
			if j, ok := byURN[name(d)]; ok {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		state[i] = 2
		out = append(out, s.Resources[i])
		return nil
	}
	for i := range s.Resources {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (f *Flock) image(ctx context.Context, r capture.Resource) error {
	id, err := BuildImage(ctx, f.Engine, f.Root, r)
	if err != nil {
		return err
	}
	f.Images[capture.MockDigest(r.Name)] = id
	return nil
}

// BuildImage builds a captured docker.Image resource on the engine as the
// docker provider would (its context, Dockerfile, target and arguments,
// relative paths from the project root) and returns the image's ID.
func BuildImage(ctx context.Context, e *Engine, root string, r capture.Resource) (string, error) {
	in := Inputs(r)
	b, _ := in["build"].(map[string]any)
	dir := str(b["context"])
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	// The engine wants the Dockerfile relative to the context.
	dockerfile := str(b["dockerfile"])
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(root, dockerfile)
	}
	dockerfile, err := filepath.Rel(dir, dockerfile)
	if err != nil || strings.HasPrefix(dockerfile, "..") {
		return "", fmt.Errorf("dockerfile %q is outside the build context %s", str(b["dockerfile"]), dir)
	}
	args := map[string]string{}
	if a, ok := b["args"].(map[string]any); ok {
		for k, v := range a {
			args[k] = str(v)
		}
	}
	// BuildKit (the provider's builder) sets TARGETARCH from the build's
	// platform, or the engine's own; the legacy builder the replay drives
	// takes it as an argument.
	if _, ok := args["TARGETARCH"]; !ok {
		if args["TARGETARCH"], err = targetArch(ctx, e, str(b["platform"])); err != nil {
			return "", err
		}
	}
	return e.Build(ctx, dir, dockerfile, str(b["target"]), str(in["imageName"]), args, map[string]string{RunLabel: "1"})
}

// targetArch is the architecture a build for platform ("os/arch", or ""
// for the engine's own) gets as TARGETARCH. The legacy builder cannot make
// an image for another platform: such a build fails loudly.
func targetArch(ctx context.Context, e *Engine, platform string) (string, error) {
	own, err := e.Arch(ctx)
	if err != nil {
		return "", err
	}
	if platform == "" {
		return own, nil
	}
	_, arch, ok := strings.Cut(platform, "/")
	if !ok || arch != own {
		return "", fmt.Errorf("platform %q: the replay builds for the engine's own platform only (linux/%s)", platform, own)
	}
	return arch, nil
}

func (f *Flock) command(ctx context.Context, r capture.Resource) error {
	in := Inputs(r)
	env := map[string]string{}
	if m, ok := in["environment"].(map[string]any); ok {
		for k, v := range m {
			env[k] = str(v)
		}
	}
	if del := str(in["delete"]); del != "" {
		f.created = append(f.created, created{typ: r.Type, name: r.Name, script: del, env: env})
	}
	out, err := runShell(ctx, str(in["create"]), str(in["stdin"]), env)
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func runShell(ctx context.Context, script, stdin string, env map[string]string) (string, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func labelMap(v any, extra map[string]string) map[string]string {
	m := map[string]string{}
	for _, l := range list(v) {
		lm := l.(map[string]any)
		m[str(lm["label"])] = str(lm["value"])
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
	for _, c := range list(in["ipamConfigs"]) {
		cm := c.(map[string]any)
		ipam = append(ipam, map[string]any{"Subnet": str(cm["subnet"]), "Gateway": str(cm["gateway"]), "IPRange": str(cm["ipRange"])})
	}
	opts := map[string]string{}
	if o, ok := in["options"].(map[string]any); ok {
		for k, v := range o {
			opts[k] = str(v)
		}
	}
	return map[string]any{
		"Name": str(in["name"]), "Driver": str(in["driver"]), "Internal": in["internal"] == true,
		"Attachable": in["attachable"] == true, "EnableIPv6": in["ipv6"] == true, "CheckDuplicate": true,
		"IPAM": map[string]any{"Driver": "default", "Config": ipam}, "Options": opts,
		"Labels": labelMap(in["labels"], map[string]string{RunLabel: "1"}),
	}
}

func (f *Flock) network(ctx context.Context, r capture.Resource) error {
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
func (f *Flock) container(ctx context.Context, r capture.Resource) error {
	in := Inputs(r)
	image := str(in["image"])
	if real, ok := f.Images[image]; ok {
		image = real
	} else {
		return fmt.Errorf("image %q was not built by this replay", image)
	}
	config, err := containerRequest(in, image)
	if err != nil {
		return err
	}
	name := str(in["name"])
	id, err := f.Engine.CreateContainer(ctx, name, config)
	if err != nil {
		return err
	}
	f.Containers[r.Name] = id
	f.created = append(f.created, created{typ: r.Type, name: r.Name, id: id})
	if nets := list(in["networksAdvanced"]); len(nets) > 0 {
		if err := f.Engine.DisconnectNetwork(ctx, "bridge", id); err != nil && !strings.Contains(err.Error(), "is not connected") {
			return fmt.Errorf("disconnect default bridge: %w", err)
		}
		for _, n := range nets {
			nm := n.(map[string]any)
			ipam := map[string]any{}
			if ip := str(nm["ipv4Address"]); ip != "" {
				ipam["IPv4Address"] = ip
			}
			if err := f.Engine.ConnectNetwork(ctx, str(nm["name"]), id, map[string]any{"Aliases": strs(nm["aliases"]), "IPAMConfig": ipam}); err != nil {
				return fmt.Errorf("connect %s: %w", str(nm["name"]), err)
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
		"Image": image, "Hostname": str(in["hostname"]), "User": str(in["user"]),
		"Env": strs(in["envs"]), "Labels": labelMap(in["labels"], map[string]string{RunLabel: "1"}),
	}
	if v := strs(in["command"]); len(v) > 0 {
		config["Cmd"] = v
	}
	if v := strs(in["entrypoints"]); len(v) > 0 {
		config["Entrypoint"] = v
	}
	if v := str(in["stopSignal"]); v != "" {
		config["StopSignal"] = v
	}
	if v, ok := in["stopTimeout"].(float64); ok {
		config["StopTimeout"] = int(v)
	}
	if hc, ok := in["healthcheck"].(map[string]any); ok {
		h := map[string]any{"Test": strs(hc["tests"]), "Retries": num(hc["retries"])}
		for k, field := range map[string]string{"interval": "Interval", "timeout": "Timeout", "startPeriod": "StartPeriod"} {
			if s := str(hc[k]); s != "" {
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
		"SecurityOpt": strs(in["securityOpts"]), "Runtime": str(in["runtime"]), "Dns": strs(in["dns"]),
		"RestartPolicy": map[string]any{"Name": str(in["restart"]), "MaximumRetryCount": num(in["maxRetryCount"])},
		"LogConfig":     map[string]any{"Type": str(in["logDriver"]), "Config": strMap(in["logOpts"])},
		"Tmpfs":         strMap(in["tmpfs"]),
		"Memory":        int64(num(in["memory"])) << 20,
		"CpuShares":     num(in["cpuShares"]),
	}
	if init, ok := in["init"].(bool); ok {
		host["Init"] = init
	}
	if swap := int64(num(in["memorySwap"])); swap > 0 {
		host["MemorySwap"] = swap << 20
	}
	if c := str(in["cpus"]); c != "" {
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
		host["CapDrop"], host["CapAdd"] = strs(caps["drops"]), strs(caps["adds"])
	}
	var ulimits []map[string]any
	for _, u := range list(in["ulimits"]) {
		um := u.(map[string]any)
		ulimits = append(ulimits, map[string]any{"Name": str(um["name"]), "Soft": num(um["soft"]), "Hard": num(um["hard"])})
	}
	host["Ulimits"] = ulimits
	var mounts []map[string]any
	for _, m := range list(in["mounts"]) {
		mm := m.(map[string]any)
		mount := map[string]any{"Type": str(mm["type"]), "Source": str(mm["source"]), "Target": str(mm["target"]), "ReadOnly": mm["readOnly"] == true}
		if bo, ok := mm["bindOptions"].(map[string]any); ok {
			mount["BindOptions"] = map[string]any{"Propagation": str(bo["propagation"])}
		}
		mounts = append(mounts, mount)
	}
	host["Mounts"] = mounts
	exposed, bindings := map[string]any{}, map[string]any{}
	for _, p := range list(in["ports"]) {
		pm := p.(map[string]any)
		proto := str(pm["protocol"])
		if proto == "" {
			proto = "tcp"
		}
		key := fmt.Sprintf("%d/%s", num(pm["internal"]), proto)
		exposed[key] = map[string]any{}
		bindings[key] = []map[string]any{{"HostIp": str(pm["ip"]), "HostPort": strconv.Itoa(num(pm["external"]))}}
	}
	if len(exposed) > 0 {
		config["ExposedPorts"] = exposed
		host["PortBindings"] = bindings
	}
	config["HostConfig"] = host
	return config, nil
}

// Teardown deletes what the replay created in reverse order of creation,
// as Pulumi deletes dependents before what they depend on (containers before
// the steps whose delete removes their images or credentials), then removes
// anything else labelled by a replay.
func (f *Flock) Teardown(ctx context.Context) error {
	var errs []string
	for i := len(f.created) - 1; i >= 0; i-- {
		c := f.created[i]
		var err error
		switch c.typ {
		case capture.TypeContainer:
			err = f.Engine.Remove(ctx, c.id)
		case capture.TypeNetwork:
			err = f.Engine.RemoveNetwork(ctx, c.id)
		case capture.TypeCommand:
			var out string
			if out, err = runShell(ctx, c.script, "", c.env); err != nil {
				err = fmt.Errorf("%w: %s", err, out)
			}
		}
		if err != nil && !IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("delete %s %s: %v", c.typ, c.name, err))
		}
	}
	if err := Clean(ctx, f.Engine); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("teardown: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Clean removes every container and network labelled by a replay.
func Clean(ctx context.Context, e *Engine) error {
	cs, err := e.ListContainers(ctx, RunLabel+"=1")
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := e.Remove(ctx, c); err != nil && !IsNotFound(err) && !IsRemovalInProgress(err) {
			return err
		}
	}
	ns, err := e.ListNetworks(ctx, RunLabel+"=1")
	if err != nil {
		return err
	}
	for _, n := range ns {
		if err := e.RemoveNetwork(ctx, n); err != nil && !IsNotFound(err) {
			return err
		}
	}
	return nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, str(e))
	}
	return out
}

func strMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, e := range m {
			out[k] = str(e)
		}
	}
	return out
}
