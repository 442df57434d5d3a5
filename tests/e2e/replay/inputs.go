// What the replay reads of a capture: the inputs it maps, refused if it does
// not, as plain Go values.

package replay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"

	"github.com/ai-flock/ai-flock/tests/capture"
)

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
